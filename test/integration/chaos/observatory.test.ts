/**
 * The node-side check itself, on records made by hand: it must flag a request of an older term that
 * a node ran after it had received one of a newer term, and nothing else. The leadership scenarios
 * rely on it; this keeps it from passing vacuously.
 */
import { describe, expect, it } from "vitest";
import type { Fleet, RpcRecord } from "../../../dev/simulator";
import { Observatory } from "../../support/chaos/deployments";

function fleetWith(record: RpcRecord[]): Fleet {
  return { record } as unknown as Fleet;
}

const ran = (requestId: string, identity: string, receivedAt: number, executedAt = receivedAt): RpcRecord => ({
  timeMs: receivedAt,
  executedAtMs: executedAt,
  identity,
  caller: "provisioner.choria=provisioner",
  agent: "choria_provision",
  action: "configure",
  requestId,
  outcome: 0,
});

describe("the node-side fencing check", () => {
  it("flags an old-term request a node ran after receiving a newer term's, and attributes every execution", () => {
    // Arrange
    const observatory = new Observatory();
    for (const [requestId, deployment, term] of [
      ["a1", "east", 1],
      ["b1", "west", 2],
      ["a2", "east", 1],
      ["a3", "east", 1],
    ] as const) {
      observatory.published.set(requestId, { requestId, deployment, term, identity: requestId === "a3" ? "n2" : "n1", action: "configure" });
    }
    const fleet = fleetWith([ran("a1", "n1", 100), ran("b1", "n1", 200), ran("a2", "n1", 300), ran("a3", "n2", 400), ran("zz", "n1", 500)]);

    // Act
    const cross = observatory.crossTermExecutions(fleet);
    const { attributed, unattributed } = observatory.executions(fleet);

    // Assert: a2 ran on n1 after b1 (term 2) arrived there; a3 ran on another node; zz was nobody's.
    expect(cross.map((execution) => execution.requestId)).toEqual(["a2"]);
    expect(attributed).toHaveLength(4);
    expect(unattributed).toBe(1);
  });

  it("flags overlapping attempts: an old-term request still running when the newer term's arrived", () => {
    // Arrange
    const observatory = new Observatory();
    observatory.published.set("old", { requestId: "old", deployment: "east", term: 1, identity: "n1", action: "configure" });
    observatory.published.set("new", { requestId: "new", deployment: "west", term: 2, identity: "n1", action: "configure" });

    // Act
    const cross = observatory.crossTermExecutions(fleetWith([ran("old", "n1", 100, 250), ran("new", "n1", 200)]));

    // Assert
    expect(cross.map((execution) => execution.requestId)).toEqual(["old"]);
  });
});
