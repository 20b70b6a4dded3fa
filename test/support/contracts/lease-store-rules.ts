/**
 * The lease store's conditions (docs/lease.md), written once and run against every LeaseStore: the
 * in-memory one (unit) and the DynamoDB one (integration), so the election, the interleaving test
 * and the local run rest on the same conditions as production. The first block holds each write's
 * condition; the second drives the lease gate over the store as a deployment does.
 */
import { randomUUID } from "node:crypto";
import { beforeEach, describe, expect, it } from "vitest";
import { LeaseLostError, PausedError } from "../../../lib/errors";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { ClaimRequest, ExtendRequest, LeaseItem, LeaseStore } from "../../../lib/ports/lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { METRIC } from "../../../lib/ports/metric-names";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../fakes";

const BOUNDS = { skewBoundMs: 5_000, deliveryHorizonMs: 10_000 };

function claim(site: string, holder: string, expiresAt: number, expiredBefore: number, seenAt = 1, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { site, holder, expiresAt, expiredBefore, waitedHorizonMs: BOUNDS.deliveryHorizonMs, seenAt, ...BOUNDS, ...overrides };
}

function extend(site: string, holder: string, expiresAt: number, term?: number, seenAt = 2, overrides: Partial<ExtendRequest> = {}): ExtendRequest {
  return { site, holder, expiresAt, term, seenAt, ...BOUNDS, ...overrides };
}

/** Until when a request of the item's term may still run at a node (before skew): expiry plus horizon. */
const deadlineOf = (item: LeaseItem | undefined) => (item ? item.expiresAt + (item.deliveryHorizonMs ?? 0) : undefined);

/**
 * `makeStore` is called before each test and that store serves the whole test (every deployment in
 * it shares it); each test uses its own site, so one table may serve them all.
 */
export function describeLeaseStoreRules(name: string, makeStore: () => LeaseStore): void {
  const uniqueSite = (label: string) => `${label}-${randomUUID()}`;
  let current: LeaseStore;
  const store = () => current;
  const freshStore = () => {
    current = makeStore();
  };

  describe(`lease store conditions (${name})`, () => {
    beforeEach(freshStore);

    it("claims an absent lease as term 1 with the holder's bounds and presence", async () => {
      const site = uniqueSite("absent");

      const write = await store().claim(claim(site, "prod-eu", 30_000, 0, 7));

      expect(write).toEqual({
        applied: true,
        item: { site, holder: "prod-eu", term: 1, expiresAt: 30_000, skewBoundMs: 5_000, deliveryHorizonMs: 10_000, peers: { "prod-eu": 7 } },
      });
      expect(await store().read(site)).toEqual(write.applied && write.item);
    });

    it("refuses a claim while the stored expiry is not below expiredBefore, answering with the stored item", async () => {
      const site = uniqueSite("live");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0));

      const atExpiry = await leases.claim(claim(site, "prod-us", 60_000, 30_000));
      const after = await leases.claim(claim(site, "prod-us", 60_000, 30_001));

      expect(atExpiry).toMatchObject({ applied: false, current: { holder: "prod-eu", term: 1, expiresAt: 30_000 } });
      expect(after).toMatchObject({ applied: true, item: { holder: "prod-us", term: 2, expiresAt: 60_000 } });
    });

    it("keeps the announced term and every peer across a takeover, and clears the release", async () => {
      const site = uniqueSite("takeover");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1));
      await leases.markAnnounced({ site, holder: "prod-eu", term: 1 });
      await leases.release({ site, holder: "prod-eu", term: 1 });

      const write = await leases.claim(claim(site, "prod-us", 70_000, 40_000, 2));

      expect(write).toEqual({
        applied: true,
        item: { site, holder: "prod-us", term: 2, expiresAt: 70_000, announcedTerm: 1, skewBoundMs: 5_000, deliveryHorizonMs: 10_000, peers: { "prod-eu": 1, "prod-us": 2 } },
      });
    });

    it("extends only for the holder, to a later expiry, an unreleased lease and the term given", async () => {
      const site = uniqueSite("extend");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0));

      const otherHolder = await leases.extend(extend(site, "prod-us", 40_000));
      const notLater = await leases.extend(extend(site, "prod-eu", 30_000));
      const otherTerm = await leases.extend(extend(site, "prod-eu", 40_000, 2));
      const anyTerm = await leases.extend(extend(site, "prod-eu", 40_000));
      const thisTerm = await leases.extend(extend(site, "prod-eu", 50_000, 1, 9));
      await leases.release({ site, holder: "prod-eu", term: 1 });
      const released = await leases.extend(extend(site, "prod-eu", 60_000, 1));

      expect([otherHolder, notLater, otherTerm].map((write) => write.applied)).toEqual([false, false, false]);
      expect(anyTerm).toMatchObject({ applied: true, item: { expiresAt: 40_000, term: 1 } });
      expect(thisTerm).toMatchObject({ applied: true, item: { expiresAt: 50_000, peers: { "prod-eu": 9 } } });
      expect(released).toMatchObject({ applied: false, current: { expiresAt: 50_000, released: true } });
    });

    it("refuses to extend an absent lease, with no stored item to answer", async () => {
      const write = await store().extend(extend(uniqueSite("absent-extend"), "prod-eu", 30_000));

      expect(write).toEqual({ applied: false, current: undefined });
    });

    it("releases only the holder's own term and keeps its expiry", async () => {
      const site = uniqueSite("release");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0));

      const otherHolder = await leases.release({ site, holder: "prod-us", term: 1 });
      const otherTerm = await leases.release({ site, holder: "prod-eu", term: 2 });
      const own = await leases.release({ site, holder: "prod-eu", term: 1 });

      expect([otherHolder.applied, otherTerm.applied]).toEqual([false, false]);
      expect(own).toMatchObject({ applied: true, item: { holder: "prod-eu", term: 1, expiresAt: 30_000, released: true } });
    });

    it("marks a term announced once, for its holder only", async () => {
      const site = uniqueSite("announce");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0));

      const otherHolder = await leases.markAnnounced({ site, holder: "prod-us", term: 1 });
      const otherTerm = await leases.markAnnounced({ site, holder: "prod-eu", term: 2 });
      const first = await leases.markAnnounced({ site, holder: "prod-eu", term: 1 });
      const second = await leases.markAnnounced({ site, holder: "prod-eu", term: 1 });

      expect([otherHolder.applied, otherTerm.applied]).toEqual([false, false]);
      expect(first).toMatchObject({ applied: true, item: { announcedTerm: 1 } });
      expect(second).toMatchObject({ applied: false, current: { announcedTerm: 1 } });
    });

    it("within a term no write moves the delivery deadline earlier: containers of one holder with 120 s and 30 s request TTLs renew alternately, and the deadline is the 120 s one's", async () => {
      const site = uniqueSite("rollout");
      const leases = store();
      const old = { deliveryHorizonMs: 120_000 };
      const rolledOut = { deliveryHorizonMs: 30_000 };
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1, old));

      const afterRolledOut = await leases.extend(extend(site, "prod-eu", 40_000, 1, 2, rolledOut));
      const afterOld = await leases.extend(extend(site, "prod-eu", 45_000, 1, 3, old));
      const rolledOutAgain = await leases.extend(extend(site, "prod-eu", 50_000, undefined, 4, rolledOut));

      // The horizon is kept past the latest expiry: the 120 s container's deadline, 30 s + 120 s, then 45 s + 120 s.
      expect(afterRolledOut).toMatchObject({ applied: true, item: { term: 1, expiresAt: 40_000, deliveryHorizonMs: 110_000 } });
      expect(afterOld).toMatchObject({ applied: true, item: { expiresAt: 45_000, deliveryHorizonMs: 120_000 } });
      expect(rolledOutAgain).toMatchObject({ applied: true, item: { expiresAt: 50_000, deliveryHorizonMs: 115_000, peers: { "prod-eu": 4 } } });
      expect(deadlineOf(await leases.read(site))).toBe(45_000 + 120_000);
    });

    it("once the container with the longer request TTL stops renewing, the horizon comes down to the writers' own within that TTL", async () => {
      const site = uniqueSite("rollout-done");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1, { deliveryHorizonMs: 120_000 }));
      const rolledOut = { deliveryHorizonMs: 30_000 };

      const within = await leases.extend(extend(site, "prod-eu", 100_000, 1, 2, rolledOut));
      const past = await leases.extend(extend(site, "prod-eu", 125_000, 1, 3, rolledOut));

      expect(within).toMatchObject({ applied: true, item: { expiresAt: 100_000, deliveryHorizonMs: 50_000 } });
      expect(past).toMatchObject({ applied: true, item: { expiresAt: 125_000, deliveryHorizonMs: 30_000 } });
    });

    it("a renewal whose expiry a sibling's already covers, but not its delivery deadline, raises the horizon only; one covered in both is not applied", async () => {
      const site = uniqueSite("covered");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1, { deliveryHorizonMs: 30_000 }));

      const longerTtl = await leases.extend(extend(site, "prod-eu", 29_000, 1, 2, { deliveryHorizonMs: 120_000 }));
      const covered = await leases.extend(extend(site, "prod-eu", 29_500, 1, 3, { deliveryHorizonMs: 60_000 }));

      expect(longerTtl).toMatchObject({ applied: true, item: { expiresAt: 30_000, deliveryHorizonMs: 119_000, peers: { "prod-eu": 2 } } });
      expect(covered).toMatchObject({ applied: false, current: { expiresAt: 30_000, deliveryHorizonMs: 119_000, peers: { "prod-eu": 2 } } });
    });

    it("concurrent renewals of one holder with different request TTLs: every one the caller can count on is within the final delivery deadline", async () => {
      const site = uniqueSite("concurrent");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1, { deliveryHorizonMs: 30_000 }));
      const requests = Array.from({ length: 12 }, (_, index) =>
        extend(site, "prod-eu", 30_000 + ((index * 7_919) % 12) * 1_000, 1, index, { deliveryHorizonMs: index % 3 === 0 ? 120_000 : 30_000 }),
      );

      const writes = await Promise.all(requests.map((request) => leases.extend(request)));

      const final = await leases.read(site);
      const countedOn = requests.filter((request, index) => {
        const write = writes[index]!;
        const item = write.applied ? write.item : write.current;
        return write.applied || (item !== undefined && item.expiresAt >= request.expiresAt && deadlineOf(item)! >= request.expiresAt + request.deliveryHorizonMs);
      });
      expect(countedOn.length).toBeGreaterThan(0);
      for (const request of countedOn) expect(deadlineOf(final)).toBeGreaterThanOrEqual(request.expiresAt + request.deliveryHorizonMs);
      expect(deadlineOf(final)).toBe(Math.max(...countedOn.map((request) => request.expiresAt + request.deliveryHorizonMs)));
    });

    it("a new term starts from its winner's own horizon, and a claim that waited a shorter horizon than the stored one is refused", async () => {
      const site = uniqueSite("new-term");
      const leases = store();
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1, { deliveryHorizonMs: 120_000 }));
      await leases.extend(extend(site, "prod-eu", 40_000, 1, 2, { deliveryHorizonMs: 30_000 }));

      const waitedTooLittle = await leases.claim(claim(site, "prod-us", 300_000, 250_000, 3, { deliveryHorizonMs: 30_000, waitedHorizonMs: 30_000 }));
      const waitedEnough = await leases.claim(claim(site, "prod-us", 300_000, 250_000, 3, { deliveryHorizonMs: 30_000, waitedHorizonMs: 110_000 }));

      expect(waitedTooLittle).toMatchObject({ applied: false, current: { holder: "prod-eu", term: 1, deliveryHorizonMs: 110_000 } });
      expect(waitedEnough).toMatchObject({ applied: true, item: { holder: "prod-us", term: 2, expiresAt: 300_000, deliveryHorizonMs: 30_000 } });
    });

    it("records a peer on an existing lease only, changing nothing else", async () => {
      const site = uniqueSite("peer");
      const leases = store();
      await leases.recordPeer({ site, deployment: "prod-us", seenAt: 3 });
      const before = await leases.read(site);
      await leases.claim(claim(site, "prod-eu", 30_000, 0, 1));

      await leases.recordPeer({ site, deployment: "prod-us", seenAt: 4 });

      expect(before).toBeUndefined();
      expect(await leases.read(site)).toEqual({
        site,
        holder: "prod-eu",
        term: 1,
        expiresAt: 30_000,
        skewBoundMs: 5_000,
        deliveryHorizonMs: 10_000,
        peers: { "prod-eu": 1, "prod-us": 4 },
      });
    });
  });

  describe(`lease gate over the store (${name})`, () => {
    beforeEach(freshStore);

    function deployment(site: string, deploymentId: string, time: VirtualClock, offsetMs = 0, deliveryHorizonMs?: number) {
      const metrics = new RecordingMetrics();
      const logger = new RecordingLogger();
      const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId, ...(deliveryHorizonMs === undefined ? {} : { deliveryHorizonMs }) });
      const gate = createLeaseGate(settings, { store: store(), metrics, logger, clock: time.skewed(offsetMs) });
      return { gate, metrics, logger };
    }

    async function stored(site: string) {
      const item = await store().read(site);
      return { holder: item?.holder, term: item?.term, expiresAt: item?.expiresAt };
    }

    it("acquires an absent lease with term 1 and reports the new term", async () => {
      const site = uniqueSite("acquire");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);

      const outcome = await leader.gate.acquireOrKeep();

      expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: true });
      expect(await stored(site)).toEqual({ holder: "prod-eu", term: 1, expiresAt: time.trueTime + 30_000 });
      expect(leader.metrics.lastGauge(METRIC.paused)).toBe(0);
      await expect(leader.gate.assertOpen(1, 5_000)).resolves.toMatchObject({ term: expect.any(Number) });
    });

    it("renews its own lease under the same term and pushes the expiry out", async () => {
      const site = uniqueSite("renew");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      await leader.gate.acquireOrKeep();
      time.advance(10_000);

      const outcome = await leader.gate.acquireOrKeep();

      expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: false });
      expect((await stored(site)).expiresAt).toBe(time.trueTime + 30_000);
    });

    it("keeps a standby paused while the leader's lease is live", async () => {
      const site = uniqueSite("standby");
      const time = new VirtualClock();
      await deployment(site, "prod-eu", time).gate.acquireOrKeep();
      const standby = deployment(site, "prod-us", time);

      const outcome = await standby.gate.acquireOrKeep();

      expect(outcome).toMatchObject({ holding: false, current: { holder: "prod-eu", term: 1 } });
      await expect(standby.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
      expect(standby.metrics.lastGauge(METRIC.paused)).toBe(1);
      expect(await standby.gate.currentTerm()).toBeUndefined();
    });

    it("takes over an expired lease only after expiry plus the skew bound, bumping the term", async () => {
      const site = uniqueSite("takeover");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      const challenger = deployment(site, "prod-us", time);
      await leader.gate.acquireOrKeep();

      time.advance(30_000 + 5_000);
      const early = await challenger.gate.acquireOrKeep();
      time.advance(1);
      const late = await challenger.gate.acquireOrKeep();

      expect(early.holding).toBe(false);
      expect(late).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
      await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
      expect(await leader.gate.acquireOrKeep()).toMatchObject({ holding: false, current: { holder: "prod-us", term: 2 } });
    });

    it("releases on a graceful stop: the leader closes at once, nobody renews, the standby takes the next term once the old expiry has passed", async () => {
      const site = uniqueSite("release");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      const standby = deployment(site, "prod-us", time);
      await leader.gate.acquireOrKeep();

      const released = await leader.gate.release();
      const early = await standby.gate.acquireOrKeep();
      time.advance(35_001);
      const outcome = await standby.gate.acquireOrKeep();

      expect(released).toBe(true);
      await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
      expect(early.holding).toBe(false);
      expect(outcome).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
    });

    it("two containers of one deployment (rpc_ttl 120 s and 30 s) renew alternately, the 30 s one last: a challenger takes over only past the 120 s one's last expiry plus the skew bound and 120 s", async () => {
      const site = uniqueSite("rollout-takeover");
      const time = new VirtualClock();
      const old = deployment(site, "prod-eu", time, 0, 120_000);
      const rolledOut = deployment(site, "prod-eu", time, 0, 30_000);
      const challenger = deployment(site, "prod-us", time, 0, 30_000);
      await old.gate.acquireOrKeep();
      time.advance(5_000);
      await rolledOut.gate.acquireOrKeep();
      time.advance(5_000);
      await old.gate.acquireOrKeep();
      const oldExpiry = time.trueTime + 30_000;
      time.advance(5_000);
      await rolledOut.gate.acquireOrKeep();
      const lastExpiry = time.trueTime + 30_000;

      time.advance(lastExpiry + 5_000 + 30_000 + 1 - time.trueTime);
      const pastTheLastWritersBounds = await challenger.gate.acquireOrKeep();
      time.advance(oldExpiry + 5_000 + 120_000 - time.trueTime);
      const atTheOldOnes = await challenger.gate.acquireOrKeep();
      time.advance(1);
      const pastTheOldOnes = await challenger.gate.acquireOrKeep();

      expect(pastTheLastWritersBounds.holding).toBe(false);
      expect(atTheOldOnes.holding).toBe(false);
      expect(pastTheOldOnes).toMatchObject({ holding: true, term: 2 });
      expect((await store().read(site))?.deliveryHorizonMs).toBe(30_000);
    });

    it("a container whose renewal a sibling's later expiry covers, but not its longer request TTL, still gets that TTL waited for", async () => {
      const site = uniqueSite("covered-takeover");
      const time = new VirtualClock();
      const rolledOut = deployment(site, "prod-eu", time, 0, 30_000);
      // A second behind: its expiry is below the sibling's, its delivery deadline far above it.
      const old = deployment(site, "prod-eu", time, -1_000, 120_000);
      const challenger = deployment(site, "prod-us", time, 0, 30_000);
      await rolledOut.gate.acquireOrKeep();
      const renewal = await old.gate.acquireOrKeep();
      const oldExpiry = time.trueTime - 1_000 + 30_000;

      time.advance(oldExpiry + 5_000 + 120_000 - time.trueTime);
      const atTheOldOnes = await challenger.gate.acquireOrKeep();
      time.advance(1);
      const pastTheOldOnes = await challenger.gate.acquireOrKeep();

      expect(renewal).toMatchObject({ holding: true, term: 1 });
      expect(atTheOldOnes.holding).toBe(false);
      expect(pastTheOldOnes).toMatchObject({ holding: true, term: 2 });
    });

    it.each([2, 3, 5])("lets exactly one of %i contending deployments win", async (contenders) => {
      const site = uniqueSite(`contention-${contenders}`);
      const time = new VirtualClock();
      const deployments = Array.from({ length: contenders }, (_, index) => deployment(site, `deployment-${index}`, time, index * 700));

      const outcomes = await Promise.all(deployments.map(({ gate }) => gate.acquireOrKeep()));

      const winners = outcomes.filter((outcome) => outcome.holding);
      expect(winners).toHaveLength(1);
      expect(winners[0]).toMatchObject({ term: 1, wonNewTerm: true });
      expect((await stored(site)).holder).toBe(`deployment-${outcomes.indexOf(winners[0]!)}`);
    });

    it("lets every concurrent invocation of the leading deployment renew", async () => {
      const site = uniqueSite("invocations");
      const time = new VirtualClock();
      await deployment(site, "prod-eu", time).gate.acquireOrKeep();
      const invocations = Array.from({ length: 4 }, (_, index) => deployment(site, "prod-eu", time, index * 300));
      time.advance(10_000);

      const outcomes = await Promise.all(invocations.map(({ gate }) => gate.acquireOrKeep()));
      const gates = await Promise.allSettled(invocations.map(({ gate }) => gate.assertOpen(1, 5_000)));

      expect(outcomes.every((outcome) => outcome.holding && outcome.term === 1)).toBe(true);
      expect(gates.map((gate) => gate.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
    });

    it("rejects work admitted under an older term once the deployment holds a newer one", async () => {
      const site = uniqueSite("stale");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      const other = deployment(site, "prod-us", time);
      await leader.gate.acquireOrKeep();
      await leader.gate.release();
      time.advance(35_001);
      await other.gate.acquireOrKeep();
      await other.gate.release();
      time.advance(35_001);

      const outcome = await leader.gate.acquireOrKeep();

      expect(outcome).toMatchObject({ holding: true, term: 3, wonNewTerm: true });
      await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(leader.gate.assertOpen(3, 1_000)).resolves.toMatchObject({ term: expect.any(Number) });
    });
  });
}
