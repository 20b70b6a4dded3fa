import { describe, expect, it } from "vitest";
import { AGENT_TIMEOUT_MS, DISCOVERY_TIMEOUT_MS, RPC_PLAN, rpcLabel } from "../../../lib/engine/plan";

describe("RPC_PLAN", () => {
  it("matches the Go provisioner's tries per call", () => {
    // Act
    const tries = Object.fromEntries(Object.values(RPC_PLAN).map((plan) => [rpcLabel(plan), plan.tries]));

    // Assert
    expect(tries).toEqual({
      "choria_provision#jwt": 3,
      "choria_provision#gen25519": 5,
      "rpcutil#inventory": 5,
      "choria_provision#gencsr": 1,
      "choria_provision#shutdown": 3,
      "choria_provision#release_update": 3,
      "choria_provision#configure": 5,
      "choria_provision#restart": 3,
    });
  });

  it("gives each attempt the discovery timeout plus the agent's DDL timeout", () => {
    // Act
    const timeouts = Object.values(RPC_PLAN).map((plan) => [plan.agent, plan.timeoutMs]);

    // Assert
    for (const [agent, timeoutMs] of timeouts) {
      expect(timeoutMs).toBe(DISCOVERY_TIMEOUT_MS + AGENT_TIMEOUT_MS[agent as keyof typeof AGENT_TIMEOUT_MS]);
    }
    expect(RPC_PLAN.configure.timeoutMs).toBe(22_000);
    expect(RPC_PLAN.inventory.timeoutMs).toBe(4_000);
  });
});
