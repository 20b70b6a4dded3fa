import { describe, expect, it } from "vitest";
import { breakdown, type HostStamps } from "../../../bench/stages";

describe("bench per-stage breakdown", () => {
  it("splits each host's admission-to-restart into its stages and gives DynamoDB requests per restarted host", () => {
    // Arrange: two hosts; the second waited 30 s in the queue.
    const host = (offset: number, queued: number): HostStamps => ({
      admittedAt: offset,
      sentAt: offset + 100,
      invokedAt: offset + 100 + queued,
      provisioningAt: offset + 150 + queued,
      inventoryAt: offset + 250 + queued,
      configuringAt: offset + 290 + queued,
      restartAt: offset + 330 + queued,
      returnedAt: offset + 900 + queued,
    });
    const hosts = new Map([
      ["a.example.net", host(0, 50)],
      ["b.example.net", host(1_000, 30_000)],
      ["c.example.net", { admittedAt: 5, sentAt: 90 }],
    ]);

    // Act
    const figures = breakdown(hosts, 2, new Map([["UpdateItem", [10, 30, 20, 40, 50, 60]]]));

    // Assert
    const stage = (name: string) => figures.stages.find((s) => s.name === name);
    expect(stage("in the queue")).toMatchObject({ p50: 50, p99: 30_000, samples: 2 });
    expect(stage("admission -> queued")).toMatchObject({ p50: 100, p99: 100, samples: 3 });
    expect(stage("helper")).toMatchObject({ p50: 40, samples: 2 });
    expect(stage("batch tail")).toMatchObject({ p50: 570, samples: 2 });
    expect(stage("admission -> restart")).toMatchObject({ p50: 380, p99: 30_330, samples: 2 });
    expect(figures.dynamodb).toEqual([{ operation: "UpdateItem", per_host: 3, p50_ms: 30, p99_ms: 60 }]);
  });
});
