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
import type { ClaimRequest, ExtendRequest, LeaseStore } from "../../../lib/lease/lease";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { METRIC } from "../../../lib/ports";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../fakes";

const BOUNDS = { skewBoundMs: 5_000, deliveryHorizonMs: 10_000 };

function claim(site: string, holder: string, expiresAt: number, expiredBefore: number, seenAt = 1): ClaimRequest {
  return { site, holder, expiresAt, expiredBefore, seenAt, ...BOUNDS };
}

function extend(site: string, holder: string, expiresAt: number, term?: number, seenAt = 2): ExtendRequest {
  return { site, holder, expiresAt, term, seenAt, ...BOUNDS };
}

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

    function deployment(site: string, deploymentId: string, time: VirtualClock, offsetMs = 0) {
      const metrics = new RecordingMetrics();
      const logger = new RecordingLogger();
      const settings = resolveLeaseSettings({ leaderElection: true, site, deploymentId });
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

      const outcome = await leader.gate.acquireOrRenew();

      expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: true });
      expect(await stored(site)).toEqual({ holder: "prod-eu", term: 1, expiresAt: time.trueTime + 30_000 });
      expect(leader.metrics.lastGauge(METRIC.paused)).toBe(0);
      await expect(leader.gate.assertOpen(1, 5_000)).resolves.toMatchObject({ term: expect.any(Number) });
    });

    it("renews its own lease under the same term and pushes the expiry out", async () => {
      const site = uniqueSite("renew");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      await leader.gate.acquireOrRenew();
      time.advance(10_000);

      const outcome = await leader.gate.acquireOrRenew();

      expect(outcome).toMatchObject({ holding: true, term: 1, wonNewTerm: false });
      expect((await stored(site)).expiresAt).toBe(time.trueTime + 30_000);
    });

    it("keeps a standby paused while the leader's lease is live", async () => {
      const site = uniqueSite("standby");
      const time = new VirtualClock();
      await deployment(site, "prod-eu", time).gate.acquireOrRenew();
      const standby = deployment(site, "prod-us", time);

      const outcome = await standby.gate.acquireOrRenew();

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
      await leader.gate.acquireOrRenew();

      time.advance(30_000 + 5_000);
      const early = await challenger.gate.acquireOrRenew();
      time.advance(1);
      const late = await challenger.gate.acquireOrRenew();

      expect(early.holding).toBe(false);
      expect(late).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
      await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
      expect(await leader.gate.acquireOrRenew()).toMatchObject({ holding: false, current: { holder: "prod-us", term: 2 } });
    });

    it("releases on a graceful stop: the leader closes at once, nobody renews, the standby takes the next term once the old expiry has passed", async () => {
      const site = uniqueSite("release");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      const standby = deployment(site, "prod-us", time);
      await leader.gate.acquireOrRenew();

      const released = await leader.gate.release();
      const early = await standby.gate.acquireOrRenew();
      time.advance(35_001);
      const outcome = await standby.gate.acquireOrRenew();

      expect(released).toBe(true);
      await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(PausedError);
      expect(early.holding).toBe(false);
      expect(outcome).toMatchObject({ holding: true, term: 2, wonNewTerm: true });
    });

    it.each([2, 3, 5])("lets exactly one of %i contending deployments win", async (contenders) => {
      const site = uniqueSite(`contention-${contenders}`);
      const time = new VirtualClock();
      const deployments = Array.from({ length: contenders }, (_, index) => deployment(site, `deployment-${index}`, time, index * 700));

      const outcomes = await Promise.all(deployments.map(({ gate }) => gate.acquireOrRenew()));

      const winners = outcomes.filter((outcome) => outcome.holding);
      expect(winners).toHaveLength(1);
      expect(winners[0]).toMatchObject({ term: 1, wonNewTerm: true });
      expect((await stored(site)).holder).toBe(`deployment-${outcomes.indexOf(winners[0]!)}`);
    });

    it("lets every concurrent invocation of the leading deployment renew", async () => {
      const site = uniqueSite("invocations");
      const time = new VirtualClock();
      await deployment(site, "prod-eu", time).gate.acquireOrRenew();
      const invocations = Array.from({ length: 4 }, (_, index) => deployment(site, "prod-eu", time, index * 300));
      time.advance(10_000);

      const outcomes = await Promise.all(invocations.map(({ gate }) => gate.acquireOrRenew()));
      const gates = await Promise.allSettled(invocations.map(({ gate }) => gate.assertOpen(1, 5_000)));

      expect(outcomes.every((outcome) => outcome.holding && outcome.term === 1)).toBe(true);
      expect(gates.map((gate) => gate.status)).toEqual(["fulfilled", "fulfilled", "fulfilled", "fulfilled"]);
    });

    it("rejects work admitted under an older term once the deployment holds a newer one", async () => {
      const site = uniqueSite("stale");
      const time = new VirtualClock();
      const leader = deployment(site, "prod-eu", time);
      const other = deployment(site, "prod-us", time);
      await leader.gate.acquireOrRenew();
      await leader.gate.release();
      time.advance(35_001);
      await other.gate.acquireOrRenew();
      await other.gate.release();
      time.advance(35_001);

      const outcome = await leader.gate.acquireOrRenew();

      expect(outcome).toMatchObject({ holding: true, term: 3, wonNewTerm: true });
      await expect(leader.gate.assertOpen(1, 1_000)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(leader.gate.assertOpen(3, 1_000)).resolves.toMatchObject({ term: expect.any(Number) });
    });
  });
}
