import { describe, expect, it } from "vitest";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import type { LeadershipDeps } from "../../../lib/app/leadership";
import { parseContinuation, type DiscoveryContinuation } from "../../../lib/app/discovery-continuation";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import { LEASE_DEFAULTS } from "../../../lib/lease/settings";
import { admissionFlowOver, answerLostOnce, blippingAdmissionStore, leadership, armedTicks, blippingLeaseStore, context, RESEND_UNKNOWN, shared, SITE, unreachableLeaseStore, world, type World } from "./support";

/**
 * The world's admission flow, each call taking `callMs` of virtual time (calls in flight together
 * overlap: a call ends at its start + callMs), then `afterEach` before it admits.
 */
function slowAdmission(w: World, callMs: number, afterEach: () => void | Promise<void> = () => undefined): LeadershipDeps["admission"] {
  return {
    admitAndEnqueue: async (...args) => {
      const endsAt = w.clock.now() + callMs;
      await new Promise((done) => setImmediate(done));
      w.clock.trueTime = Math.max(w.clock.trueTime, endsAt);
      await afterEach();
      return w.admission.admitAndEnqueue(...args);
    },
  };
}

describe("leadership: discover", () => {
  it("takes the lease, announces the new term once and queues term-stamped work for every node it finds", async () => {
    // Arrange
    const w = world();
    w.broker.identities = ["a.example.net", "b.example.net", "c.example.net"];
    const useCase = leadership(w);

    // Act
    const result = await useCase.discover(context());

    // Assert
    expect(result).toEqual({ paused: false, term: 1, discovered: 3, admitted: 3 });
    expect(w.broker.startupsPublished).toBe(1);
    expect(w.broker.discoveries).toBe(1);
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).term)).toEqual([1, 1, 1]);
    expect(w.metrics.total(METRIC.discovered)).toBe(3);
    expect(w.metrics.total(METRIC.discoverCycles)).toBe(1);
    expect(w.metrics.lastGauge(METRIC.workQueueEntries)).toBe(3);
  });

  it("gauges, from the listing that tells known hosts apart, the hosts whose provisioning JWT expires within the window and those whose JWT has expired", async () => {
    // Arrange: one host provisioned with a token expiring in 10 days, one with a token expiring in a
    // year, one refused at step jwt with an expired token (the registry's default window: 30 days).
    const w = world();
    const DAY_MS = 24 * 3_600_000;
    const now = w.clock.now();
    const ended = async (identity: string, end: (claim: Parameters<typeof w.registry.complete>[0]) => Promise<unknown>) => {
      const work = await w.registry.admit(identity, "discovery", 7);
      const begun = await w.registry.begin(work!, 7);
      if (begun.status !== "claimed") throw new Error(`expected a claim on ${identity}`);
      await end(begun.claim);
    };
    await ended("soon.example.net", (claim) => w.registry.complete(claim, "provisioned", undefined, { issuer: "image-2025", expiresAt: now + 10 * DAY_MS }));
    await ended("later.example.net", (claim) => w.registry.complete(claim, "provisioned", undefined, { issuer: "image-2026", expiresAt: now + 365 * DAY_MS }));
    await ended("stale.example.net", (claim) =>
      w.registry.recordFailure(claim, { step: "jwt", reason: "token is expired", failures: 1, park: false, provisioningJwt: { issuer: "image-2024", expiresAt: now - DAY_MS } }),
    );
    w.broker.identities = ["new.example.net"];
    const useCase = leadership(w);

    // Act
    await useCase.discover(context());

    // Assert
    expect(w.metrics.lastGauge(EXTRA_METRIC.provisioningJwtsExpiring)).toBe(1);
    expect(w.metrics.lastGauge(EXTRA_METRIC.provisioningJwtsExpired)).toBe(1);
  });

  it("queues the work of admissions whose answers were lost in a burst, in the same discovery, not an interval later", async () => {
    // Arrange: every admission lands, but its answer and the settling read's are lost once.
    const w = world();
    w.broker.identities = ["a.example.net", "b.example.net", "c.example.net"];
    const admission = admissionFlowOver(w, answerLostOnce(w.admissionStore), { resendUnknown: RESEND_UNKNOWN });
    const useCase = leadership({ ...w, admission });

    // Act: a 30 s discovery.
    const result = await useCase.discover(context(30_000));

    // Assert
    expect(result).toMatchObject({ paused: false, discovered: 3, admitted: 3 });
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity).sort()).toEqual(["a.example.net", "b.example.net", "c.example.net"]);
  });

  it("the discovery that announces a term the lease keeper won sends again the admissions whose answers were lost", async () => {
    // Arrange: the keeper's round wins the term; every admission lands, but its answer and the
    // settling read's are lost once. Without the keeper's time left, these hosts waited two intervals.
    const w = world();
    w.broker.identities = ["a.example.net", "b.example.net", "c.example.net"];
    const admission = admissionFlowOver(w, answerLostOnce(w.admissionStore), { resendUnknown: RESEND_UNKNOWN });
    const useCase = leadership({ ...w, admission });

    // Act: one keeper invocation of a minute.
    await useCase.keepLease(context(60_000));

    // Assert
    expect(w.broker.startupsPublished).toBe(1);
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity).sort()).toEqual(["a.example.net", "b.example.net", "c.example.net"]);
  });

  it("admits and queues in chunks: 25 nodes are all queued", async () => {
    // Arrange
    const w = world();
    w.broker.identities = Array.from({ length: 25 }, (_, index) => `n${index}.example.net`);
    const useCase = leadership(w);

    // Act
    const result = await useCase.discover(context());

    // Assert
    expect(result.admitted).toBe(25);
    expect(new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).size).toBe(25);
  });

  it("admits a waiting fleet of 1,000 in its first cycle when each chunk takes a second of a 30 s invocation", async () => {
    // Arrange: every admitAndEnqueue call (ten conditional writes and one SendMessageBatch) takes 1 s
    // of the invocation's time, calls in flight together overlapping, as DynamoDB Local answered
    // under load (280 hosts admitted at 10 s). Time is virtual: a call ends at its start + 1 s.
    const w = world();
    w.broker.identities = Array.from({ length: 1_000 }, (_, index) => `n${index}.example.net`);
    const deadline = w.clock.now() + 30_000;
    const useCase = leadership({ ...w, admission: slowAdmission(w, 1_000) });

    // Act
    const result = await useCase.discover({ remainingMs: () => deadline - w.clock.now() });

    // Assert: every host is on the host-work queue, none left for the next cycle a minute later.
    expect(result.admitted).toBe(1_000);
    expect(new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).size).toBe(1_000);
    expect(w.logger.at("warn").map((line) => line.message)).not.toContain("stopped admitting before the invocation deadline; the next discovery finds the rest");
  });

  it("admits only under a term confirmed for the time a chunk may take, so a deposed leader queues no stale work", async () => {
    // Arrange: east leads term 1 and discovers 1,000 nodes. Each chunk of ten takes 2 s of virtual
    // time (the budget a chunk is given; calls in flight overlapping), so admitting them all takes
    // 40 s, past the 25 s the lease round at the start is valid for (30 s lease, 5 s skew bound).
    // From 5 s on, east's lease store stops answering: its lease runs out at 30 s, and west may take
    // over once the skew bound has passed too.
    const leaseStore = blippingLeaseStore();
    const site = shared({ leaseStore });
    const east = world({ deploymentId: "east", shared: site });
    const identities = Array.from({ length: 1_000 }, (_, index) => `n${index}.example.net`);
    east.broker.identities = identities;
    const startedAt = east.clock.now();
    const slow = slowAdmission(east, 2_000, () => {
      if (east.clock.now() - startedAt >= 5_000) leaseStore.failNextCalls(Number.POSITIVE_INFINITY);
    });
    const deadline = startedAt + 55_000;

    // Act: east's discovery, then west's once the lease is claimable.
    const eastResult = await leadership({ ...east, admission: slow }).discover({ remainingMs: () => deadline - east.clock.now() });
    leaseStore.failNextCalls(0);
    east.clock.trueTime = Math.max(east.clock.trueTime, startedAt + 45_000);
    const west = world({ deploymentId: "west", shared: site });
    west.broker.identities = identities;
    const westResult = await leadership(west).discover(context(55_000));

    // Assert: east admitted only while term 1 was confirmed for a chunk's 2 s, so all of its work
    // could still run; west, the next leader, admitted the whole fleet under term 2 (a newer term
    // admits a host again at once).
    const eastWork = east.queues.hostWork.bodies().map(decodeHostWork);
    expect(eastWork.length).toBe(eastResult.admitted);
    expect(eastWork.length).toBeLessThan(1_000);
    expect(eastWork.filter((work) => work.admittedAt - startedAt > 25_000)).toEqual([]);
    expect(new Set(eastWork.map((work) => work.term))).toEqual(new Set([1]));
    expect(east.logger.at("warn").map((line) => line.message)).toContain("stopped admitting: the lease term could not be confirmed; the next leader's discovery finds the rest");
    const westWork = west.queues.hostWork.bodies().map(decodeHostWork);
    expect(westResult).toMatchObject({ paused: false, term: 2, admitted: 1_000 });
    expect(new Set(westWork.map((work) => work.term))).toEqual(new Set([2]));
  });

  it("is paused while another deployment holds the lease: nothing is discovered or queued", async () => {
    // Arrange
    const site = shared();
    const leader = world({ deploymentId: "west", shared: site });
    await leadership(leader).discover(context());
    const standby = world({ deploymentId: "east", shared: site });
    standby.broker.identities = ["a.example.net"];

    // Act
    const result = await leadership(standby).discover(context());

    // Assert
    expect(result).toEqual({ paused: true, discovered: 0, admitted: 0 });
    expect(standby.broker.discoveries).toBe(0);
    expect(standby.queues.hostWork.sent).toEqual([]);
  });

  it("is paused when the lease store cannot be reached", async () => {
    // Arrange
    const w = world({ shared: shared({ leaseStore: unreachableLeaseStore() }) });
    w.broker.identities = ["a.example.net"];

    // Act
    const result = await leadership(w).discover(context());

    // Assert
    expect(result.paused).toBe(true);
    expect(w.broker.discoveries).toBe(0);
  });

  it("near the deadline admits nothing and leaves the nodes to the next discovery", async () => {
    // Arrange
    const w = world();
    w.broker.identities = ["a.example.net", "b.example.net"];
    const useCase = leadership(w, { deadlineMarginMs: 1_000 });

    // Act: the first discovery wins the term; the second has 2.5 s left, 1 s of it kept back.
    await useCase.discover(context());
    w.clock.advance(10_000);
    w.broker.identities = ["c.example.net"];
    const result = await useCase.discover(context(2_500));

    // Assert
    expect(result).toEqual({ paused: false, term: 1, discovered: 1, admitted: 0 });
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).not.toContain("c.example.net");
    expect(w.logger.at("warn").map((line) => line.message)).toContain(
      "stopped admitting before the invocation deadline; the next discovery finds the rest",
    );
  });

  it("counts a failed discovery and a capped one", async () => {
    // Arrange
    const w = world();
    const useCase = leadership(w);
    w.broker.discoverError = new Error("no responders");

    // Act
    const failed = await useCase.discover(context());
    w.broker.discoverError = undefined;
    w.broker.capped = true;
    w.broker.identities = ["a.example.net"];
    const capped = await useCase.discover(context());

    // Assert
    expect(failed).toEqual({ paused: false, term: 1, discovered: 0, admitted: 0 });
    expect(w.metrics.total(METRIC.discoveryErrors)).toBe(1);
    expect(capped.admitted).toBe(1);
    expect(w.metrics.total(EXTRA_METRIC.discoveryCapped)).toBe(1);
  });

  it("admits names the registry knows before a flood of new names, up to the budget of new ones, and counts the rest", async () => {
    // Arrange: three hosts admitted under an earlier term, then a discovery where forged names came first.
    const w = world();
    const real = ["web1.example.net", "web2.example.net", "web3.example.net"];
    for (const identity of real) await w.registry.admit(identity, "discovery", 0);
    w.broker.identities = [...Array.from({ length: 500 }, (_, index) => `forged-${index}.example.net`), ...real];
    const useCase = leadership(w, { discoveryMaxNodes: 100, discoveryNewNamesPerInterval: 20 });

    // Act
    const result = await useCase.discover(context());

    // Assert
    const queued = w.queues.hostWork.bodies().map((body) => decodeHostWork(body));
    expect(result).toEqual({ paused: false, term: 1, discovered: 23, admitted: 23 });
    expect(queued.filter((work) => real.includes(work.identity)).map((work) => work.term)).toEqual([1, 1, 1]);
    expect(w.metrics.total(EXTRA_METRIC.discoveryNamesDropped)).toBe(480);
    expect(w.logger.at("warn").find((line) => line.message.includes("discovery_new_names_per_interval"))?.attributes).toMatchObject({ droppedNew: 480, droppedKnown: 0 });
  });

  it("treats every name as new when the registry cannot be read, so the budget still bounds the flood", async () => {
    // Arrange
    const w = world();
    w.broker.identities = Array.from({ length: 50 }, (_, index) => `forged-${index}.example.net`);
    const useCase = leadership(w, {
      discoveryMaxNodes: 100,
      discoveryNewNamesPerInterval: 5,
      registry: {
        siteNames: () => Promise.reject(new Error("table unreachable")),
        waitingNames: () => Promise.reject(new Error("table unreachable")),
        rememberWaiting: () => Promise.reject(new Error("table unreachable")),
        quarantine: () => Promise.reject(new Error("table unreachable")),
      },
    });

    // Act
    const result = await useCase.discover(context());

    // Assert
    expect(result.admitted).toBe(5);
    expect(w.metrics.total(EXTRA_METRIC.discoveryNamesDropped)).toBe(45);
    expect(w.logger.at("warn").map((line) => line.message)).toContain("could not read the known hosts; treating every discovered name as new");
    // Not read is not none: the quarantine's gauge says nothing rather than 0, so its alarm keeps its state.
    expect(w.metrics.lastGauge(EXTRA_METRIC.hostsQuarantined)).toBeUndefined();
    expect(w.logger.at("warn").map((line) => line.message)).toEqual(
      expect.arrayContaining([
        "could not read the names earlier discoveries left waiting; choosing new names at random",
        "could not remember the names this discovery left waiting; the next one chooses among them at random",
      ]),
    );
  });

  it("admits every real node by the second discovery while a client answers each discovery first with 50 fresh made-up names", async () => {
    // Arrange: budget 10; the forger's names come before the three real ones and are new each time.
    const w = world();
    const real = ["web1.example.net", "web2.example.net", "web3.example.net"];
    const useCase = leadership(w, { discoveryMaxNodes: 100, discoveryNewNamesPerInterval: 10 });

    // Act
    for (let round = 0; round < 2; round++) {
      w.broker.identities = [...Array.from({ length: 50 }, (_, index) => `forged-${round}-${index}.example.net`), ...real];
      await useCase.discover(context());
      w.clock.advance(60_000);
    }

    // Assert: at the queue.
    const queued = w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity);
    expect(queued.filter((identity) => real.includes(identity)).sort()).toEqual(real);
    expect(queued).toHaveLength(20);
  });

  it("admits a forger's repeated names and the real nodes among them within ceil(names / budget) discoveries", async () => {
    // Arrange
    const w = world();
    const real = ["web1.example.net", "web2.example.net", "web3.example.net"];
    w.broker.identities = [...Array.from({ length: 50 }, (_, index) => `forged-${index}.example.net`), ...real];
    const useCase = leadership(w, { discoveryMaxNodes: 100, discoveryNewNamesPerInterval: 10 });

    // Act
    for (let round = 0; round < Math.ceil(53 / 10); round++) {
      await useCase.discover(context());
      w.clock.advance(60_000);
    }

    // Assert
    const queued = new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity));
    expect(queued.size).toBe(53);
    for (const identity of real) expect(queued).toContain(identity);
  });

  it("writes the names waiting only while there are some: once the hosts are known, a discovery writes nothing", async () => {
    // Arrange
    const w = world();
    w.broker.identities = ["a.example.net", "b.example.net"];
    const remembered: number[] = [];
    const useCase = leadership(w, {
      discoveryMaxNodes: 100,
      discoveryNewNamesPerInterval: 5,
      registry: {
        siteNames: () => w.registry.siteNames(),
        quarantine: (...args) => w.registry.quarantine(...args),
        waitingNames: () => w.registry.waitingNames(),
        rememberWaiting: (names) => {
          remembered.push(names.length);
          return w.registry.rememberWaiting(names);
        },
      },
    });

    // Act
    const admitted: number[] = [];
    for (let round = 0; round < 3; round++) {
      admitted.push((await useCase.discover(context())).admitted);
      // Within the interval, so the known hosts are not admitted again.
      w.clock.advance(1_000);
    }

    // Assert: the chosen names are remembered until the registry knows them, then forgotten once.
    expect(admitted).toEqual([2, 0, 0]);
    expect(remembered).toEqual([2, 0]);
    expect(await w.registry.waitingNames()).toEqual([]);
  });

  it("without leader election announces once per container and discovers under term 0", async () => {
    // Arrange
    const w = world({ leaderElection: false });
    w.broker.identities = ["a.example.net"];
    const useCase = leadership(w);

    // Act
    const first = await useCase.discover(context());
    const second = await useCase.discover(context());

    // Assert
    expect(first).toEqual({ paused: false, term: 0, discovered: 1, admitted: 1 });
    expect(second.admitted).toBe(0);
    expect(w.broker.startupsPublished).toBe(1);
  });

  it("a startup event that cannot be published does not stop the discovery", async () => {
    // Arrange
    const w = world();
    w.broker.publishError = new Error("broker gone");
    w.broker.identities = ["a.example.net"];

    // Act
    const result = await leadership(w).discover(context());

    // Assert
    expect(result.admitted).toBe(1);
    expect(w.logger.at("error").map((line) => line.message)).toContain("could not publish the provisioner startup event");
  });
});

describe("leadership: a discovery paced to the rate hosts are worked off", () => {
  const BACKLOG_MS = 4_000;
  const fleet = (size: number) => Array.from({ length: size }, (_, i) => `node-${String(i).padStart(5, "0")}.example.net`);

  it("keeps what waits in the queue to the backlog: no host of 1,000 waits much longer than 4 s, and all are admitted in the invocation", async () => {
    // Arrange: 1,000 nodes, provisioners working off 25 hosts a second (40 s for the fleet), a 55 s
    // discovery. Unpaced, the whole fleet is queued at once and the last host waits about 40 s.
    const w = world();
    w.broker.identities = fleet(1_000);
    const worked = w.queues.hostWork.workedOffAt(w.clock, 25);
    const deadline = w.clock.now() + 55_000;
    const useCase = leadership(w, { discoveryBacklogMs: BACKLOG_MS });

    // Act
    const result = await useCase.discover({ remainingMs: () => deadline - w.clock.now() });

    // Assert: all admitted in this discovery; the longest wait is the backlog plus one read's lag.
    expect(result.admitted).toBe(1_000);
    expect(new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).size).toBe(1_000);
    await w.clock.sleep(60_000);
    await w.queues.hostWork.counts();
    expect(worked.waitsMs).toHaveLength(1_000);
    expect(Math.max(...worked.waitsMs)).toBeLessThanOrEqual(BACKLOG_MS + 1_000);
    expect(w.logger.at("warn")).toEqual([]);
  });

  it("admits what the invocation can pace and leaves the rest to the next discovery, said at info, not as a deadline warning", async () => {
    // Arrange: 3,000 nodes at 25 hosts a second is two minutes of work: more than one 55 s discovery.
    const w = world();
    w.broker.identities = fleet(3_000);
    const worked = w.queues.hostWork.workedOffAt(w.clock, 25);
    const deadline = w.clock.now() + 55_000;
    const useCase = leadership(w, { discoveryBacklogMs: BACKLOG_MS, discoveryMaxNodes: 3_000, discoveryNewNamesPerInterval: 3_000 });

    // Act
    const result = await useCase.discover({ remainingMs: () => deadline - w.clock.now() });

    // Assert: about 55 s of work plus the backlog was admitted, no chunk with under 2 s to go, the rest is left.
    expect(result.admitted).toBeGreaterThanOrEqual(1_200);
    expect(result.admitted).toBeLessThanOrEqual(55 * 25 + 4 * 25 + 50);
    expect(deadline - w.clock.now()).toBeGreaterThanOrEqual(2_000);
    const left = w.logger.at("info").find((line) => line.message.startsWith("admitted as fast as hosts were worked off"));
    expect(left?.attributes).toMatchObject({ term: 1, admitted: result.admitted, leftPaced: 3_000 - result.admitted });
    expect(w.logger.at("warn")).toEqual([]);
    expect(Math.max(...worked.waitsMs)).toBeLessThanOrEqual(BACKLOG_MS + 1_000);
  });

  it("admits unpaced, with a warning, when the queue's depth cannot be read", async () => {
    // Arrange
    const w = world();
    w.broker.identities = fleet(1_000);
    w.queues.hostWork.countsError = new Error("AccessDenied: sqs:GetQueueAttributes");
    const deadline = w.clock.now() + 55_000;
    const useCase = leadership(w, { discoveryBacklogMs: BACKLOG_MS });

    // Act
    const result = await useCase.discover({ remainingMs: () => deadline - w.clock.now() });

    // Assert
    expect(result.admitted).toBe(1_000);
    expect(w.logger.at("warn").map((line) => [line.message, line.attributes?.error])).toContainEqual([
      "could not read the host-work queue's depth; admitting without pacing",
      "AccessDenied: sqs:GetQueueAttributes",
    ]);
  });

  it("does not read the queue for a discovery the floor admits whole, nor pace one without a deadline", async () => {
    // Arrange
    const small = world();
    small.broker.identities = fleet(50);
    small.queues.hostWork.countsError = new Error("must not be read to pace");
    const noDeadline = world();
    noDeadline.broker.identities = fleet(500);
    noDeadline.queues.hostWork.countsError = new Error("must not be read to pace");

    // Act
    const smallResult = await leadership(small, { discoveryBacklogMs: BACKLOG_MS }).discover({ remainingMs: () => 55_000 });
    await leadership(noDeadline, { discoveryBacklogMs: BACKLOG_MS }).onWonTerm(7);

    // Assert
    expect(smallResult.admitted).toBe(50);
    expect(noDeadline.queues.hostWork.sent).toHaveLength(500);
    for (const w of [small, noDeadline]) expect(w.logger.at("warn").map((line) => line.message)).not.toContain("could not read the host-work queue's depth; admitting without pacing");
  });
});

/** The discovery continuations queued on the world's lifecycle queue, in the order sent. */
function continuationsQueued(w: World): DiscoveryContinuation[] {
  return w.queues.lifecycle.sent.flatMap((message) => {
    const continuation = parseContinuation(message.body);
    return continuation ? [continuation] : [];
  });
}

describe("leadership: a discovery that left names out continues at once", () => {
  const fleet = (size: number) => Array.from({ length: size }, (_, i) => `node-${String(i).padStart(5, "0")}.example.net`);

  it("over the deadline, having queued some, queues exactly one continuation under its term, bounded by one interval", async () => {
    // Arrange: 1,000 nodes, each chunk taking 1 s of a 6 s invocation (1 s kept back): some are queued, the rest left.
    const w = world();
    w.broker.identities = fleet(1_000);
    const deadline = w.clock.now() + 6_000;
    const startedAt = w.clock.now();
    const useCase = leadership({ ...w, admission: slowAdmission(w, 1_000) });

    // Act
    const result = await useCase.discover({ remainingMs: () => deadline - w.clock.now() });

    // Assert
    expect(result.admitted).toBeGreaterThan(0);
    expect(result.admitted).toBeLessThan(1_000);
    expect(continuationsQueued(w)).toEqual([{ term: 1, until: startedAt + 60_000 }]);
    const queued = w.logger.at("info").find((line) => line.message.startsWith("queued a discovery continuation"));
    expect(queued?.attributes).toMatchObject({ term: 1, admitted: result.admitted, leftForNextCycle: 1_000 - result.admitted, leftPaced: 0, droppedOverBudget: 0 });
  });

  it("paced, having queued some, queues exactly one continuation", async () => {
    // Arrange: 3,000 nodes worked off at 25 a second: more than one 55 s discovery admits paced.
    const w = world();
    w.broker.identities = fleet(3_000);
    w.queues.hostWork.workedOffAt(w.clock, 25);
    const deadline = w.clock.now() + 55_000;
    const useCase = leadership(w, { discoveryBacklogMs: 4_000, discoveryMaxNodes: 3_000, discoveryNewNamesPerInterval: 3_000 });

    // Act
    const result = await useCase.discover({ remainingMs: () => deadline - w.clock.now() });

    // Assert
    expect(continuationsQueued(w).map((continuation) => continuation.term)).toEqual([1]);
    const queued = w.logger.at("info").find((line) => line.message.startsWith("queued a discovery continuation"));
    expect(queued?.attributes).toMatchObject({ leftPaced: 3_000 - result.admitted, leftForNextCycle: 0 });
  });

  it("over the new-names budget, having queued some, queues exactly one continuation", async () => {
    // Arrange
    const w = world();
    w.broker.identities = fleet(25);
    const useCase = leadership(w, { discoveryNewNamesPerInterval: 10 });

    // Act
    const result = await useCase.discover(context());

    // Assert
    expect(result.admitted).toBe(10);
    expect(continuationsQueued(w).map((continuation) => continuation.term)).toEqual([1]);
    const queued = w.logger.at("info").find((line) => line.message.startsWith("queued a discovery continuation"));
    expect(queued?.attributes).toMatchObject({ droppedOverBudget: 15 });
  });

  it("queues none when it queued nothing (the admission table is down), nor when it left nothing out", async () => {
    // Arrange
    const down = world();
    down.broker.identities = fleet(25);
    const outage = blippingAdmissionStore(down.admissionStore);
    outage.failing.calls = Number.POSITIVE_INFINITY;
    const failing = admissionFlowOver(down, outage.store);
    const whole = world();
    whole.broker.identities = fleet(25);

    // Act
    const downResult = await leadership({ ...down, admission: failing }, { discoveryNewNamesPerInterval: 10 }).discover(context());
    const wholeResult = await leadership(whole).discover(context());

    // Assert
    expect(downResult.admitted).toBe(0);
    expect(continuationsQueued(down)).toEqual([]);
    expect(wholeResult.admitted).toBe(25);
    expect(continuationsQueued(whole)).toEqual([]);
  });

  it("a continuation of the term it holds discovers again at once and admits the rest; the chain ends when nothing is left", async () => {
    // Arrange: 25 nodes, a budget of 10 new names a discovery.
    const w = world();
    w.broker.identities = fleet(25);
    const useCase = leadership(w, { discoveryNewNamesPerInterval: 10 });

    // Act: the scheduled discovery, then each continuation it queued, as the lifecycle function runs them.
    await useCase.discover(context());
    for (let next = 0; next < continuationsQueued(w).length; next++) {
      w.gate.beginInvocation();
      await useCase.continueDiscovery(continuationsQueued(w)[next] as DiscoveryContinuation, context(30_000));
    }

    // Assert: three discoveries under term 1 admitted all 25; the last left nothing out and queued no continuation.
    expect(w.broker.discoveries).toBe(3);
    expect(continuationsQueued(w)).toHaveLength(2);
    expect(new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).size).toBe(25);
    expect(new Set(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).term))).toEqual(new Set([1]));
  });

  it("drops a continuation of a term this deployment no longer holds, at info, without discovering", async () => {
    // Arrange: east leads term 1 and queues a continuation; its lease lapses and west takes term 2.
    const site = shared();
    const east = world({ deploymentId: "east", shared: site });
    east.broker.identities = fleet(25);
    const eastUseCase = leadership(east, { discoveryNewNamesPerInterval: 10 });
    await eastUseCase.discover(context());
    const [continuation] = continuationsQueued(east);
    east.clock.advance(LEASE_DEFAULTS.leaseDurationMs + LEASE_DEFAULTS.skewBoundMs + 1_000);
    const west = world({ deploymentId: "west", shared: site });
    await leadership(west).keepLease(context());

    // Act
    east.gate.beginInvocation();
    const result = await eastUseCase.continueDiscovery(continuation as DiscoveryContinuation, context(30_000));

    // Assert
    expect(result).toEqual({ paused: true, discovered: 0, admitted: 0 });
    expect(east.broker.discoveries).toBe(1);
    expect(east.logger.at("info").find((line) => line.message.startsWith("dropping a discovery continuation"))?.attributes).toMatchObject({ term: 1 });
  });

  it("queues no further continuation once its chain has run for an interval", async () => {
    // Arrange
    const w = world();
    w.broker.identities = fleet(25);
    const useCase = leadership(w, { discoveryNewNamesPerInterval: 10 });
    await useCase.discover(context());
    const [continuation] = continuationsQueued(w);
    w.clock.advance(60_000);

    // Act
    w.gate.beginInvocation();
    const result = await useCase.continueDiscovery(continuation as DiscoveryContinuation, context(30_000));

    // Assert
    expect(result.admitted).toBe(10);
    expect(continuationsQueued(w)).toHaveLength(1);
  });

  it("a continuation the queue refuses is a warning; the discovery's outcome stands", async () => {
    // Arrange
    const w = world();
    w.broker.identities = fleet(25);
    w.queues.lifecycle.refuse = () => ({ accepted: false, permanent: true, reason: "AccessDenied" });
    const useCase = leadership(w, { discoveryNewNamesPerInterval: 10 });

    // Act
    const result = await useCase.discover(context());

    // Assert
    expect(result).toEqual({ paused: false, term: 1, discovered: 10, admitted: 10 });
    expect(w.logger.at("warn").map((line) => line.message)).toContain("could not queue the discovery's continuation; the next scheduled discovery finds the rest");
  });
});

describe("leadership: keepLease", () => {
  it("one round wins the term, announces and discovers it at once, then arms a tick every keep interval up to the next run", async () => {
    // Arrange
    const w = world();
    w.broker.identities = ["a.example.net"];
    const useCase = leadership(w);
    const started = w.clock.now();

    // Act
    const result = await useCase.keepLease(context(60_000));

    // Assert: ticks at 10, 20, ... 60 s, each due when SQS delivers it, all in the lifecycle queue.
    expect(result).toEqual({ holding: true, wonTerm: 1, armed: 6 });
    expect(armedTicks(w.queues.lifecycle)).toEqual([10, 20, 30, 40, 50, 60].map((seconds) => ({ dueAt: started + seconds * 1000, delaySeconds: seconds })));
    expect(w.broker.startupsPublished).toBe(1);
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity)).toEqual(["a.example.net"]);
    expect((await w.leaseStore.read(SITE))?.holder).toBe("east");
  });

  it("the next run keeps the term without announcing it again and arms the minute after", async () => {
    // Arrange
    const w = world();
    const useCase = leadership(w);
    await useCase.keepLease(context(60_000));
    w.clock.advance(60_000);

    // Act
    const second = await useCase.keepLease(context(60_000));

    // Assert
    expect(second).toEqual({ holding: true, armed: 6 });
    expect(armedTicks(w.queues.lifecycle)).toHaveLength(12);
    expect(w.broker.startupsPublished).toBe(1);
    expect((await w.leaseStore.read(SITE))?.term).toBe(1);
  });

  it("keeps the won term through an announcing discovery that admits for longer than the lease lasts", async () => {
    // Arrange: the keeper's round wins term 1, whose announcement discovers 1,000 nodes inside
    // that round. Each chunk of ten takes 2 s of virtual time (five in flight), so the admission
    // takes 40 s, past the 30 s lease, while the keeper's round waits for it.
    // Each chunk also looks at the lease item: a lapse is when a standby could have taken over.
    const w = world();
    w.broker.identities = Array.from({ length: 1_000 }, (_, index) => `n${index}.example.net`);
    let lapsedAt: number | undefined;
    const slow = slowAdmission(w, 2_000, async () => {
      const lease = await w.leaseStore.read(SITE);
      if (lease && lease.expiresAt < w.clock.now()) lapsedAt ??= w.clock.now();
    });
    const useCase = leadership({ ...w, admission: slow });

    // Act: one keeper invocation of 70 s.
    const result = await useCase.keepLease(context(70_000));

    // Assert: the discovery renewed the lease as it went, so term 1 never lapsed: no second term
    // was won, every host's work is term 1's, the current term, and the ticks were armed after it.
    expect(lapsedAt).toBeUndefined();
    expect(result).toEqual({ holding: true, wonTerm: 1, armed: 6 });
    const work = w.queues.hostWork.bodies().map(decodeHostWork);
    expect(work).toHaveLength(1_000);
    expect(new Set(work.map((entry) => entry.term))).toEqual(new Set([1]));
    expect(await w.gate.currentTerm()).toBe(1);
  });

  it("a standby neither wins nor announces, and arms one tick at the moment the lease becomes claimable", async () => {
    // Arrange: the leader stops keeping after its round.
    const site = shared();
    const leader = world({ deploymentId: "west", shared: site });
    await leadership(leader).discover(context());
    const stored = await site.leaseStore.read(SITE);
    const standby = world({ deploymentId: "east", shared: site });
    const claimableAt = stored!.expiresAt + LEASE_DEFAULTS.skewBoundMs + 1;

    // Act
    const result = await leadership(standby).keepLease(context(60_000));
    const [tick] = armedTicks(standby.queues.lifecycle);

    // Assert: one tick, due at the claimable moment rounded up to SQS's whole seconds.
    expect(result).toEqual({ holding: false, armed: 1 });
    expect(armedTicks(standby.queues.lifecycle)).toHaveLength(1);
    expect(tick!.dueAt).toBe(standby.clock.now() + tick!.delaySeconds! * 1000);
    expect(tick!.dueAt).toBeGreaterThanOrEqual(claimableAt);
    expect(tick!.dueAt - 1_000).toBeLessThan(claimableAt);
    expect(standby.broker.startupsPublished).toBe(0);
    // ...and when it comes, the standby's round takes the lease over.
    standby.clock.advance(tick!.dueAt - standby.clock.now());
    expect(await standby.gate.acquireOrKeep()).toMatchObject({ holding: true, term: 2, tookOver: true });
  });

  it("a lease store failure does not throw: nothing is armed, and the ticks armed before still come", async () => {
    // Arrange
    const w = world({ shared: shared({ leaseStore: unreachableLeaseStore() }) });

    // Act
    const result = await leadership(w).keepLease(context(60_000));

    // Assert
    expect(result).toEqual({ holding: false, armed: 0 });
    expect(w.queues.lifecycle.sent).toEqual([]);
    expect(w.logger.at("warn").map((line) => line.message)).toContain("the keeper's lease round failed; the ticks already armed still run");
  });

  it("without leader election is one round that announces the container once and arms the bridge's ticks", async () => {
    // Arrange
    const w = world({ leaderElection: false });
    const useCase = leadership(w);

    // Act
    const first = await useCase.keepLease(context());
    const second = await useCase.keepLease(context());

    // Assert
    expect(first).toEqual({ holding: true, armed: 6 });
    expect(second).toEqual(first);
    expect(armedTicks(w.queues.lifecycle)).toHaveLength(12);
    expect(w.broker.startupsPublished).toBe(1);
  });
});

describe("leadership: quarantine at discovery (docs/audit.md)", () => {
  it("quarantines a name two senders answered for and names that cannot be unique, admits the rest, and gauges the quarantined hosts", async () => {
    // Arrange
    const w = world();
    w.broker.identities = ["a.example.net", "twin.example.net", "localhost", "web12", "b.example.net"];
    w.broker.collisions = [{ identity: "twin.example.net", replies: [{ reply: "0123456789abcdef", receivedAt: 1 }, { reply: "fedcba9876543210", receivedAt: 2 }] }];
    const useCase = leadership(w);

    // Act
    const result = await useCase.discover(context());

    // Assert
    expect(result).toMatchObject({ discovered: 2, admitted: 2 });
    expect(w.queues.hostWork.bodies().map((body) => decodeHostWork(body).identity).sort()).toEqual(["a.example.net", "b.example.net"]);
    const quarantined = (await w.registry.summary()).quarantined;
    expect(quarantined.map((host) => host.identity).sort()).toEqual(["localhost", "twin.example.net", "web12"]);
    expect(quarantined.find((host) => host.identity === "twin.example.net")?.senders).toEqual([
      { reply: "0123456789abcdef", receivedAt: 1 },
      { reply: "fedcba9876543210", receivedAt: 2 },
    ]);
    expect(w.metrics.lastGauge(EXTRA_METRIC.hostsQuarantined)).toBe(3);
  });

  it("leaves a quarantined name out of later discoveries where it answers alone, without writing it again, until it is released", async () => {
    // Arrange
    const w = world();
    w.broker.identities = ["twin.example.net"];
    w.broker.collisions = [{ identity: "twin.example.net", replies: [{ reply: "01", receivedAt: 1 }, { reply: "02", receivedAt: 2 }] }];
    const useCase = leadership(w);
    await useCase.discover(context());
    const quarantinedAt = (await w.registry.summary()).quarantined[0]!.quarantinedAt;
    w.broker.collisions = [];
    w.clock.advance(120_000);

    // Act
    const held = await useCase.discover(context());
    const stillHeldAt = (await w.registry.summary()).quarantined[0]!.quarantinedAt;
    await w.registry.releaseQuarantine("twin.example.net");
    const released = await useCase.discover(context());

    // Assert
    expect(held).toMatchObject({ discovered: 0, admitted: 0 });
    expect(stillHeldAt).toBe(quarantinedAt);
    expect(released).toMatchObject({ discovered: 1, admitted: 1 });
    expect(w.metrics.values(EXTRA_METRIC.hostsQuarantined)).toEqual([1, 1, 0]);
  });
});
