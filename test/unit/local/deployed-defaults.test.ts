/**
 * The local stack runs with what serverless.yml deploys (dev/local/deployed-defaults.ts reads it),
 * and docs/local-run.md states those figures.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { readDeployedDefaults } from "../../../dev/local/deployed-defaults";
import { DEFAULT_TIMINGS } from "../../../dev/local/stack";

const deployed = readDeployedDefaults();
const DOC = readFileSync(new URL("../../../docs/local-run.md", import.meta.url), "utf8");
const row = (fn: string) => DOC.split("\n").find((line) => line.startsWith(`| ${fn} |`)) ?? "";
const awsColumn = (fn: string) => row(fn).split("|")[2] ?? "";

describe("the local stack's AWS timings", () => {
  it("are serverless.yml's function timeouts, queue visibility, redrive, batch sizes and concurrency", () => {
    // Assert
    expect(DEFAULT_TIMINGS).toMatchObject({
      discoverTimeoutMs: deployed.functions.discover.timeoutMs,
      keeperTimeoutMs: deployed.functions.leaseKeeper.timeoutMs,
      keeperRateMs: deployed.functions.leaseKeeper.rateMs,
      lifecycleTimeoutMs: deployed.functions.lifecycle.timeoutMs,
      provisionTimeoutMs: deployed.functions.provision.timeoutMs,
      renewTimeoutMs: deployed.functions.renew.timeoutMs,
      renewRateMs: deployed.functions.renew.rateMs,
      hostWork: deployed.hostWork,
      lifecycle: deployed.lifecycle,
    });
  });

  it("read serverless.yml's literal values, params resolved", () => {
    // Assert
    expect(deployed.functions.provision).toEqual({ timeoutMs: 300_000, memoryMb: 512 });
    expect(deployed.hostWork).toEqual({ visibilitySeconds: 1810, maxReceiveCount: 10, batchSize: 10, maxConcurrency: 10 });
    expect(deployed.lifecycle).toEqual({ visibilitySeconds: 180, maxReceiveCount: 5, batchSize: 10, maxConcurrency: 2 });
  });

  it("keep each queue's visibility at least 6 x its consumer's timeout, as Lambda recommends for SQS sources", () => {
    // Assert
    expect(deployed.hostWork.visibilitySeconds * 1000).toBeGreaterThanOrEqual(6 * deployed.functions.provision.timeoutMs);
    expect(deployed.lifecycle.visibilitySeconds * 1000).toBeGreaterThanOrEqual(6 * deployed.functions.lifecycle.timeoutMs);
  });

  it.each([
    ["lease-keeper", [`timeout ${deployed.functions.leaseKeeper.timeoutMs / 1000} s`]],
    ["discover", [`timeout ${deployed.functions.discover.timeoutMs / 1000} s`]],
    ["renew", [`every ${deployed.functions.renew.rateMs! / 1000} s`, `timeout ${deployed.functions.renew.timeoutMs / 1000} s`]],
    [
      "lifecycle",
      [
        `batch ${deployed.lifecycle.batchSize}`,
        `${deployed.lifecycle.maxConcurrency} concurrent`,
        `timeout ${deployed.functions.lifecycle.timeoutMs / 1000} s`,
        `visibility ${deployed.lifecycle.visibilitySeconds} s`,
        `DLQ after ${deployed.lifecycle.maxReceiveCount} receives`,
      ],
    ],
    [
      "provision",
      [
        `(${deployed.hostWork.batchSize})`,
        `\`--concurrency\` (${deployed.hostWork.maxConcurrency})`,
        `timeout ${deployed.functions.provision.timeoutMs / 1000} s`,
        `visibility ${deployed.hostWork.visibilitySeconds} s`,
        `DLQ after ${deployed.hostWork.maxReceiveCount} receives`,
      ],
    ],
  ])("docs/local-run.md states serverless.yml's figures for %s", (fn, figures) => {
    // Assert
    for (const figure of figures) expect(awsColumn(fn)).toContain(figure);
  });
});
