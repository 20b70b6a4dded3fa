import { describe, expect, it } from "vitest";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { release, reprovision, status, type ReprovisionDeps, type StatusDeps } from "../../../lib/app/operator/functions";
import { MemoryRenewalStore } from "../../support/stores/memory-renewal-store";
import type { RenewalStore } from "../../../lib/app/use-case-ports";
import { describeLease, releaseOnBehalf } from "../../../lib/lease/stored-lease";
import { MemoryPauseStore } from "../../support/stores/memory-pause-store";
import { Operator } from "../../../lib/app/operator/site-operator";
import { METRIC } from "../../../lib/ports/metric-names";
import { InMemoryQueue } from "../../support/fakes";
import { shared, SITE, world, type World } from "./support";

function statusDeps(w: World, renewalStore: RenewalStore = new MemoryRenewalStore()): StatusDeps {
  return {
    renewalStore,
    site: SITE,
    deploymentId: w.deploymentId,
    leaderElection: w.leaderElection,
    ...(w.leaderElection ? { leaseStore: w.leaseStore } : {}),
    registry: w.registry,
    queues: w.queues,
    clock: w.clock,
    metrics: w.metrics,
  };
}

const NOT_LEADING = "this deployment does not lead";

function reprovisionDeps(w: World): ReprovisionDeps {
  return { currentTerm: () => w.gate.currentTerm(), notLeading: NOT_LEADING, admission: w.admission, registry: w.registry, forceHint: '"force": true', logger: w.logger };
}

describe("operator: status", () => {
  it("shows the leader's lease, the queue depths and the registry, and reports not paused", async () => {
    // Arrange
    const w = world();
    const term = await w.gate.currentTerm();
    await w.admission.admitAndEnqueue(["a.example.net", "b.example.net"], "discovery", term!);
    w.queues.lifecycleDlq.countsError = new Error("AccessDenied");

    // Act
    const report = await status(statusDeps(w));

    // Assert
    const stored = await w.leaseStore.read(SITE);
    expect(report).toEqual({
      site: SITE,
      deploymentId: "east",
      leaderElection: true,
      role: "leader",
      lease: { leader: "east", term: 1, expiresAt: stored!.expiresAt, heldByThisDeployment: true },
      queues: {
        hostWork: { visible: 2, inFlight: 0, delayed: 0 },
        hostWorkDlq: { visible: 0, inFlight: 0, delayed: 0 },
        lifecycle: { visible: 0, inFlight: 0, delayed: 0 },
        lifecycleDlq: { error: "AccessDenied" },
      },
      registry: expect.objectContaining({ total: 2, byState: expect.objectContaining({ queued: 2 }) }),
      renewal: {
        expiry: { known: 0, expired: 0, atRisk: 0, within24h: 0, within7d: 0, within30d: 0, next: [], expiredHosts: [] },
        inFlight: 0,
        failed: [],
        failing: 0,
        runs: { missing: expect.stringContaining('no renew run has been seen on site "lab"') },
      },
    });
    expect(w.metrics.lastGauge(METRIC.paused)).toBe(0);
  });

  it("shows when provisioned hosts' credentials expire, the next ones due, and why renewal paused itself", async () => {
    // Arrange
    const w = world();
    const term = (await w.gate.currentTerm()) as number;
    const hour = 3_600_000;
    const provisioned = async (identity: string, expiresAt: number, kind: "certificate" | "server_jwt") => {
      const work = await w.registry.admit(identity, "discovery", term);
      const begun = await w.registry.begin(work!, term);
      if (begun.status !== "claimed") throw new Error(begun.status);
      await w.registry.complete(begun.claim, "provisioned", { expiresAt, kind, issuedAt: w.clock.now() });
    };
    await provisioned("soon.example.net", w.clock.now() + 2 * hour, "certificate");
    await provisioned("week.example.net", w.clock.now() + 5 * 24 * hour, "server_jwt");
    await provisioned("month.example.net", w.clock.now() + 20 * 24 * hour, "certificate");
    const renewalStore = new MemoryRenewalStore();
    await renewalStore.write(SITE, { inFlight: {}, recent: [], sends: [], paused: { reason: "6 of the last 20 renewals failed", at: w.clock.now() } }, 0);

    // Act
    const report = await status(statusDeps(w, renewalStore));

    // Assert
    expect(report.renewal).toMatchObject({
      expiry: { known: 3, expired: 0, within24h: 1, within7d: 2, within30d: 3 },
      paused: { reason: "6 of the last 20 renewals failed" },
    });
    expect(report.renewal.expiry.next.map((entry) => [entry.identity, entry.kind])).toEqual([
      ["soon.example.net", "certificate"],
      ["week.example.net", "server_jwt"],
      ["month.example.net", "certificate"],
    ]);
  });

  it("lists the expired hosts with what to do for each, the hosts at risk, and the failed ones with their next try", async () => {
    // Arrange: a 10 h window (renew.before); one v1 and one v2 host expired, one at risk, one retried.
    const w = world();
    const term = (await w.gate.currentTerm()) as number;
    const hour = 3_600_000;
    const provisioned = async (identity: string, expiresAt: number, kind: "certificate" | "server_jwt") => {
      const begun = await w.registry.begin((await w.registry.admit(identity, "discovery", term))!, term);
      if (begun.status !== "claimed") throw new Error(begun.status);
      const credentials = { expiresAt, kind, issuedAt: w.clock.now() - 30 * 24 * hour };
      await w.registry.complete(begun.claim, "provisioned", credentials);
      return credentials;
    };
    await provisioned("v1.example.net", w.clock.now() + hour, "certificate");
    await provisioned("v2.example.net", w.clock.now() + 2 * hour, "server_jwt");
    await provisioned("risky.example.net", w.clock.now() + 4 * hour, "server_jwt");
    const retried = await provisioned("retried.example.net", w.clock.now() + 9 * hour, "server_jwt");
    const mark = { attempts: 2, retryAt: w.clock.now() + 3 * hour + 60_000, reason: "no answer", at: w.clock.now() + 3 * hour };
    await w.registry.markRenewal({ identity: "retried.example.net", credentials: retried }, mark);
    w.clock.advance(3 * hour);

    // Act
    const report = await status({ ...statusDeps(w), renew: { before: { ms: 10 * hour }, ratePerMinute: 10, maxInFlight: 50, timeoutMs: 15 * 60_000 } });

    // Assert
    expect(report.renewal.expiry).toMatchObject({ known: 4, expired: 2, atRisk: 1 });
    expect(report.renewal.expiry.expiredHosts).toEqual([
      { identity: "v2.example.net", expiredAt: expect.any(Number), kind: "server_jwt", action: expect.stringContaining("restart the node's Choria server") },
      { identity: "v1.example.net", expiredAt: expect.any(Number), kind: "certificate", action: expect.stringContaining("re-enrol the node") },
    ]);
    expect(report.renewal.failed).toEqual([{ identity: "retried.example.net", ...mark }]);
    expect(report.renewal.failing).toBe(1);
  });

  it("on a standby shows the other leader and reports paused", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();
    const standby = world({ deploymentId: "east", shared: site });

    // Act
    const report = await status(statusDeps(standby));

    // Assert
    expect(report.lease).toMatchObject({ leader: "west", term: 1, heldByThisDeployment: false });
    expect(standby.metrics.lastGauge(METRIC.paused)).toBe(1);
  });

  it("shows a released lease as without a leader", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    await w.gate.release();

    // Act
    const report = await status(statusDeps(w));

    // Assert
    expect(report.lease).toEqual({ leader: null, term: 1, expiresAt: null, heldByThisDeployment: false });
  });

  it("without leader election has no lease and is never paused", async () => {
    // Arrange
    const w = world({ leaderElection: false });

    // Act
    const report = await status(statusDeps(w));

    // Assert
    expect(report.lease).toEqual({ leader: null, term: null, expiresAt: null, heldByThisDeployment: false });
    expect(w.metrics.lastGauge(METRIC.paused)).toBe(0);
  });
});

describe("operator: reprovision", () => {
  it("admits known hosts again at once under the current term, and refuses invalid names", async () => {
    // Arrange
    const w = world();
    await w.admission.admitAndEnqueue(["a.example.net"], "discovery", (await w.gate.currentTerm())!);

    // Act
    const result = await reprovision(reprovisionDeps(w), ["a.example.net", "not valid"]);

    // Assert
    expect(result).toEqual({ term: 1, admitted: ["a.example.net"], refused: [{ identity: "not valid", reason: expect.stringContaining("whitespace") }] });
    expect(w.queues.hostWork.bodies().map(decodeHostWork).at(-1)).toMatchObject({ identity: "a.example.net", term: 1, source: "operator" });
  });

  it("refuses a host the registry does not know and one just provisioned, unless forced", async () => {
    // Arrange
    const w = world();
    const term = (await w.gate.currentTerm())!;
    const begun = await w.registry.begin((await w.registry.admit("done.example.net", "discovery", term))!, term);
    if (begun.status !== "claimed") throw new Error(begun.status);
    await w.registry.complete(begun.claim, "provisioned");

    // Act
    const refused = await reprovision(reprovisionDeps(w), ["new.example.net", "done.example.net"]);
    const queuedAfterRefusal = w.queues.hostWork.sent.length;
    const forced = await reprovision(reprovisionDeps(w), ["new.example.net", "done.example.net", "not valid"], { force: true });

    // Assert
    expect(refused).toEqual({
      term,
      admitted: [],
      refused: [
        { identity: "new.example.net", reason: 'not known to the registry (never discovered, or its entry expired): admit it only if it is in provisioning mode now ("force": true)' },
        { identity: "done.example.net", reason: 'already provisioned: it left provisioning mode and would not answer; put it back in provisioning mode first, then "force": true' },
      ],
    });
    expect(queuedAfterRefusal).toBe(0);
    expect(forced).toEqual({ term, admitted: ["new.example.net", "done.example.net"], refused: [{ identity: "not valid", reason: expect.stringContaining("whitespace") }] });
  });

  it("refuses every host while this deployment does not lead", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();
    const standby = world({ deploymentId: "east", shared: site });

    // Act
    const result = await reprovision(reprovisionDeps(standby), ["a.example.net", "a.example.net"]);

    // Assert
    expect(result).toEqual({ term: null, admitted: [], refused: [{ identity: "a.example.net", reason: NOT_LEADING }] });
    expect(standby.queues.hostWork.sent).toEqual([]);
  });

  it("the operator CLI's reprovision applies the same rules and gives the same reasons and result", async () => {
    // Arrange
    const w = world();
    const term = (await w.gate.currentTerm())!;
    const [work] = (await w.admission.admitAndEnqueue(["busy.example.net", "known.example.net"], "discovery", term)).queued;
    await w.registry.begin(work!, term);
    const noDeadLetters = { receive: async () => [], unhide: async () => undefined, remove: async () => undefined };
    const dlq = Object.assign(new InMemoryQueue("memory://dlq"), noDeadLetters);
    const cli = new Operator({
      site: SITE,
      deploymentId: "east",
      lease: w.leaseStore,
      pause: new MemoryPauseStore(),
      registry: w.registry,
      queues: { ...w.queues, hostWorkDlq: dlq },
      clock: w.clock,
    });
    const hosts = ["busy.example.net", "unknown.example.net"];

    // Act
    const fromCli = await cli.reprovision([...hosts, "known.example.net"]);
    const fromFunction = await reprovision(reprovisionDeps(w), hosts);

    // Assert
    expect(fromCli).toEqual({
      term,
      admitted: ["known.example.net"],
      refused: [
        { identity: "unknown.example.net", reason: expect.stringContaining("not known to the registry") },
        { identity: "busy.example.net", reason: "the host is being provisioned right now" },
      ],
    });
    const withoutHint = (result: { refused: Array<{ identity: string; reason: string }> }) =>
      result.refused.map(({ identity, reason }) => ({ identity, reason: reason.replace(/--force|"force": true/, "FORCE") }));
    expect(withoutHint(fromFunction)).toEqual(withoutHint(fromCli));
  });
});

describe("operator: release", () => {
  it("gives up the lease: the stored term is released and no longer anyone's", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();

    // Act
    const result = await release({ leaderElection: true, release: () => w.gate.release(), logger: w.logger });

    // Assert
    expect(result).toEqual({ released: true });
    expect(describeLease(await w.leaseStore.read(SITE), "east", w.clock.now()).leader).toBeNull();
    expect(await w.gate.currentTerm()).toBeUndefined();
  });

  it("releases on behalf of the deployment from a container that never held it, and not another deployment's lease", async () => {
    // Arrange
    const site = shared();
    await world({ deploymentId: "west", shared: site }).gate.acquireOrKeep();

    // Act
    const notOurs = await releaseOnBehalf(site.leaseStore, { site: SITE, holder: "east" });
    const ours = await releaseOnBehalf(site.leaseStore, { site: SITE, holder: "west" });

    // Assert
    expect(notOurs).toEqual({ released: false, term: 1 });
    expect(ours).toEqual({ released: true, term: 1 });
    expect((await site.leaseStore.read(SITE))?.released).toBe(true);
  });

  it("without leader election there is nothing to release", async () => {
    // Arrange
    let asked = false;

    // Act
    const result = await release({ leaderElection: false, release: async () => (asked = true), logger: world().logger });

    // Assert
    expect(result).toEqual({ released: false });
    expect(asked).toBe(false);
  });
});
