import { describe, expect, it } from "vitest";
import { readRealFleetOutput, realFleetMarkdown, summariseRealFleet, type RealFleetRun } from "../../../bench/peer-realfleet";

const OUTPUT = [
  "30 go-choria 0.30.2 servers (protocol v1, jwt+pki) provisioning broker nats://127.0.0.1:1, target nats://127.0.0.1:2 (choria broker, TLS)",
  "  node1.realfleet.example.net: configured 1x, restarted 1x, on the target broker",
  "30/30 provisioned in 12.4 s from the Go provisioner's start (20.1 s with fleet setup); memory (PSS / RSS): nodes 1 / 2 MiB (1 / 1 MiB each), brokers 1 / 1 MiB",
  "admin choria=admin.mcollective: 30/30 ping replies, 30/30 authorized rpcutil inventory replies",
  "",
].join("\n");

const run = (overrides: Partial<RealFleetRun>): RealFleetRun => ({
  side: "go",
  nodes: 30,
  setting: "workers 64",
  provisioned: 30,
  seconds: 12,
  pings: 30,
  authorized: 30,
  exit_code: 0,
  load_average_1m: { start: 1.1, max: 3 },
  ...overrides,
});

describe("bench:peer on the real fleet", () => {
  it("reads the harness's time to all provisioned and the admin's replies", () => {
    expect(readRealFleetOutput(OUTPUT, 30)).toEqual({ provisioned: 30, seconds: 12.4, pings: 30, authorized: 30 });
  });

  it("names everything a run's output lacks or falls short of, in one pass", () => {
    // Arrange
    const short = OUTPUT.replace("30/30 provisioned", "28/30 provisioned").replace("30/30 authorized", "27/30 authorized");

    // Act
    const partial = readRealFleetOutput(short, 30);
    const empty = readRealFleetOutput("the fleet did not start\n", 30);

    // Assert
    expect(partial.problem).toBe("28/30 nodes provisioned; admin: 30/30 pings, 27/30 authorized inventories");
    expect(empty).toMatchObject({ provisioned: 0, seconds: undefined });
    expect(empty.problem).toBe("the harness printed no 'provisioned in' line; the harness printed no admin ping and inventory line");
  });

  it("compares each side's fastest complete run, Go's time over ours", () => {
    // Arrange
    const runs = [run({ seconds: 12 }), run({ side: "ours", setting: "10 x 10", seconds: 10 }), run({ seconds: 9.6 }), run({ side: "ours", setting: "10 x 10", seconds: 7, problem: "29/30 nodes provisioned" })];

    // Act
    const summary = summariseRealFleet(runs, 2);

    // Assert
    expect(summary).toEqual({ nodes: 30, go_seconds: 9.6, ours_seconds: 10, ratio_time: 0.96, max_start_load: 1.1 });
  });

  it("gives no ratio when a side has no complete run or its fastest started above the core count, and says why", () => {
    // Arrange
    const runs = [run({ load_average_1m: { start: 4.5, max: 6 } }), run({ side: "ours", exit_code: 1, problem: "the harness exited with 1" })];

    // Act
    const summary = summariseRealFleet(runs, 2);

    // Assert
    expect(summary.ratio_time).toBeNull();
    expect(summary.not_comparable).toEqual(["no complete run of ours", "Go's fastest run started at load 4.5, above the 2 cores"]);
    expect(realFleetMarkdown({ run: true, runs, summary }, 2).join("\n")).toContain("- **no ratio:** no complete run of ours");
  });

  it("says why the real fleet was not run", () => {
    expect(realFleetMarkdown({ run: false, reason: "--real-fleet 0" }, 2)[0]).toBe("**Real go-choria fleet:** not run: --real-fleet 0");
  });
});
