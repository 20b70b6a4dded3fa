/**
 * Renewal over a real nats-server against the fleet simulator's provisioned nodes, which answer
 * choria_provision#reprovision on their main collective. What the nodes recorded decides: which
 * requests they ran, when, and what they answered.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MemoryAdmissionStore } from "../../support/stores/memory-admission-store";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { Renewal, type RenewalDeps } from "../../../lib/app/renewal";
import { MemoryRenewalStore } from "../../support/stores/memory-renewal-store";
import { PausedError } from "../../../lib/errors";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { systemClock } from "../../../lib/ports/clock";
import { startFleet, type Fleet, type NodeFaults } from "../../../dev/simulator";
import { CappedWaitRpc, FakeGate, RecordingLogger, RecordingMetrics } from "../../support/fakes";
import { brokerForSuite } from "../../support/suite";
import { renewalSettings } from "../../support/renewal";
import { rpcClient } from "../../support/simulator";

const TOKEN = "renewal-fleet-token";
const TERM = 9;
const HOUR_MS = 3_600_000;
const broker = brokerForSuite();
let fleet: Fleet | undefined;

afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
});

async function setup(count: number, settings: Partial<RenewalDeps["settings"]>, faults: Record<string, NodeFaults> = {}) {
  fleet = await startFleet({
    natsUrl: broker.nats.url,
    count,
    identityPrefix: "renew",
    token: TOKEN,
    initialConfig: { "plugin.choria.server.provision": "false" },
    restartDelayMs: 100,
    faults,
  });
  const metrics = new RecordingMetrics();
  const logger = new RecordingLogger();
  const registry = new AdmissionRegistry({ site: "lab", intervalMs: 60_000 }, { store: new MemoryAdmissionStore(), metrics, logger });
  const now = Date.now();
  for (const [index, identity] of fleet.identities.entries()) {
    const begun = await registry.begin((await registry.admit(identity, "discovery", TERM))!, TERM);
    if (begun.status !== "claimed") throw new Error(`could not claim ${identity}`);
    await registry.complete(begun.claim, "provisioned", { expiresAt: now + HOUR_MS + index * 1000, kind: "server_jwt", issuedAt: now - HOUR_MS });
  }
  const gate = Object.assign(new FakeGate(systemClock), {
    async standing(this: FakeGate) {
      return this.closeWhen() ? { kind: "standby" as const, current: undefined } : { kind: "leading" as const, term: TERM };
    },
  });
  const store = new MemoryRenewalStore();
  const renewal = new Renewal({
    settings: renewalSettings({ site: "lab", token: TOKEN, before: { ms: 2 * HOUR_MS }, ...settings }),
    gate,
    registry,
    store,
    // A node that does not answer costs 2 s here instead of the 22 s DDL timeout.
    rpc: new CappedWaitRpc(rpcClient(broker.nc, 1, { collective: "mcollective" }), 2_000),
    prepareRpc: async () => undefined,
    clock: systemClock,
    logger,
    metrics,
  });
  const ran = () => fleet!.record.filter((entry) => entry.action === "reprovision" && entry.outcome !== "dropped");
  return { fleet, renewal, gate, registry, store, metrics, ran, run: () => renewal.run({ remainingMs: () => 60_000 }) };
}

/** Every reprovision request a node received, run or dropped. */
function fleetRecords(nodes: Fleet) {
  return nodes.record.filter((entry) => entry.action === "reprovision");
}

describe("renewal against simulated provisioned nodes", () => {
  it("sends reprovision on the main collective at no more than the rate, and the nodes go back into provisioning mode", { timeout: 60_000 }, async () => {
    // Arrange
    const w = await setup(30, { ratePerMinute: 12, maxInFlight: 20 });

    // Act: a second run inside the same minute has no rate left.
    const first = await w.run();
    const second = await w.run();

    // Assert, from the nodes' records.
    expect(first).toMatchObject({ status: "ran", refused: [] });
    expect(first.status === "ran" && first.sent).toHaveLength(12);
    expect(second.status === "ran" && second.sent).toEqual([]);
    const ran = w.ran();
    expect(ran).toHaveLength(12);
    expect(new Set(ran.map((entry) => entry.identity)).size).toBe(12);
    expect(ran.every((entry) => entry.outcome === 0 && entry.caller === "provisioner.example.net.choria=provisioner.mcollective")).toBe(true);
    await w.fleet.waitFor(() => ran.every((entry) => w.fleet.node(entry.identity).inProvisioningMode), 10_000);
    // The soonest expiries went first.
    expect(ran.map((entry) => entry.identity).sort()).toEqual(w.fleet.identities.slice(0, 12).sort());
  });

  it("a leader deposed between its standing and its sends sends nothing (node side), and frees what it reserved", { timeout: 60_000 }, async () => {
    // Arrange: the run finds itself leading; the term moves on before its first request leaves.
    const w = await setup(30, { ratePerMinute: 30, maxInFlight: 30 });
    let reads = 0;
    w.gate.failure = new PausedError("lease term 9 is no longer current");
    w.gate.closeWhen = () => ++reads > 1;

    // Act
    const result = await w.run();
    await new Promise((resolve) => setTimeout(resolve, 1_500));

    // Assert: no node received a reprovision request, and nothing is left counted in flight.
    expect(fleetRecords(w.fleet)).toEqual([]);
    expect(result).toMatchObject({ status: "ran", sent: [], refused: [], inFlight: 0 });
    expect(w.gate.checks.length).toBeGreaterThan(0);
    expect(Object.keys((await w.store.read("lab")).state.inFlight)).toEqual([]);
  });

  it("marks a node that refuses with the reason, to be tried again, and renews the others", { timeout: 60_000 }, async () => {
    // Arrange
    const refusing = "renew2.example.net";
    const w = await setup(5, { ratePerMinute: 10 }, {
      [refusing]: { status: { reprovision: { statuscode: 1, statusmsg: "You are not authorized to call this agent or action" } } },
    });

    // Act
    const result = await w.run();

    // Assert
    expect(result).toMatchObject({ refused: [{ identity: refusing, reason: "You are not authorized to call this agent or action (status 1)" }] });
    expect(result.status === "ran" && result.sent).toHaveLength(4);
    expect((await w.registry.expiries()).find((host) => host.identity === refusing)?.renewal).toMatchObject({ attempts: 1, reason: expect.stringContaining("You are not authorized") });
    expect(w.fleet.node(refusing).inNormalMode).toBe(true);
    expect(w.metrics.total(EXTRA_METRIC.renewalFailures)).toBe(1);
  });
});
