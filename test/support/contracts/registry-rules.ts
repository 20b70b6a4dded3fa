/**
 * The registry rules of docs/behaviour.md §2, written once and run against every AdmissionStore: the
 * in-memory one (unit) and the DynamoDB one (integration), so both evaluate the same conditions.
 */
import { describe, expect, it } from "vitest";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { ClaimRequest } from "../../../lib/ports/admission-store";
import { AdmissionStoreError, type AdmissionStore, type AdmissionWrite, type AdmitRequest } from "../../../lib/ports/admission-store";
import { failuresInARow, type HostClaim } from "../../../lib/admission/claim";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { RecordingLogger, RecordingMetrics, VirtualClock } from "../fakes";

const INTERVAL = 60_000;
const CLAIM_TTL = 120_000;
/** The registry's documented bounds, stated here: the status report lists at most 50 failures, and the waiting names fit in 256 KiB of their 400 KB item. */
const LAST_ERRORS_SHOWN = 50;
const WAITING_MAX_BYTES = 256 * 1024;
const DAY_MS = 24 * 3_600_000;

/**
 * Counts writes and can disturb the next one as a store client does: `lost` applies it and throws
 * (its answer never came), `retried` applies it and answers with a second attempt of the same
 * request (an SDK retry after a slow answer), which fails the condition the first one satisfied.
 */
class CountingStore implements AdmissionStore {
  writes = 0;
  /** `unapplied`: the write throws without being applied yet (it may still land later). */
  nextWrite: "lost" | "retried" | "unapplied" | undefined;
  /** This many next writes throw without being applied yet, after any `nextWrite` disturbance. */
  unappliedWrites = 0;
  /** The next consistent read fails (the store is still unreachable when the registry settles). */
  failNextRead = false;
  /** The next read or write of the names waiting for discovery fails. */
  failNextWaiting = false;
  /** The last request of each write, to send it again as a late duplicate. */
  readonly lastRequest: { admit?: AdmitRequest; claim?: ClaimRequest } = {};
  set loseNextResponse(lose: boolean) {
    this.nextWrite = lose ? "lost" : undefined;
  }
  constructor(private readonly inner: AdmissionStore) {}
  admit: AdmissionStore["admit"] = (request) => {
    this.lastRequest.admit = request;
    return this.write(() => this.inner.admit(request));
  };
  claim: AdmissionStore["claim"] = (request) => {
    this.lastRequest.claim = request;
    return this.write(() => this.inner.claim(request));
  };
  markProvisioned: AdmissionStore["markProvisioned"] = (request) => this.write(() => this.inner.markProvisioned(request));
  markRenewal: AdmissionStore["markRenewal"] = (request) => this.write(() => this.inner.markRenewal(request));
  recordCredentials: AdmissionStore["recordCredentials"] = (request) => this.write(() => this.inner.recordCredentials(request));
  forget: AdmissionStore["forget"] = (request) => this.write(() => this.inner.forget(request));
  releaseClaim: AdmissionStore["releaseClaim"] = (request) => this.write(() => this.inner.releaseClaim(request));
  recordFailure: AdmissionStore["recordFailure"] = (request) => this.write(() => this.inner.recordFailure(request));
  forgetQueued: AdmissionStore["forgetQueued"] = (request) => this.write(() => this.inner.forgetQueued(request));
  forgetUnlessClaimed: AdmissionStore["forgetUnlessClaimed"] = (request) => this.write(() => this.inner.forgetUnlessClaimed(request));
  voidClaim: AdmissionStore["voidClaim"] = (request) => this.write(() => this.inner.voidClaim(request));
  quarantine: AdmissionStore["quarantine"] = (request) => this.write(() => this.inner.quarantine(request));
  releaseQuarantine: AdmissionStore["releaseQuarantine"] = (request) => this.write(() => this.inner.releaseQuarantine(request));
  read: AdmissionStore["read"] = async (key) => {
    if (this.failNextRead) {
      this.failNextRead = false;
      throw new Error("read timed out");
    }
    return this.inner.read(key);
  };
  listSite: AdmissionStore["listSite"] = (site) => this.inner.listSite(site);
  readWaiting: AdmissionStore["readWaiting"] = (site) => this.waiting(() => this.inner.readWaiting(site));
  rememberWaiting: AdmissionStore["rememberWaiting"] = (request) => this.waiting(() => this.inner.rememberWaiting(request));
  private async waiting<T>(send: () => Promise<T>): Promise<T> {
    if (this.failNextWaiting) {
      this.failNextWaiting = false;
      throw new Error("ProvisionedThroughputExceededException");
    }
    return send();
  }
  private async write(send: () => Promise<AdmissionWrite>): Promise<AdmissionWrite> {
    this.writes++;
    let disturbance = this.nextWrite;
    this.nextWrite = undefined;
    if (disturbance === undefined && this.unappliedWrites > 0) {
      this.unappliedWrites--;
      disturbance = "unapplied";
    }
    if (disturbance === "unapplied") throw new Error("request timed out before the store applied it");
    const result = await send();
    if (disturbance === "lost") throw new Error("response lost after the write landed");
    if (disturbance === "retried") return send();
    return result;
  }
}

export function describeRegistryRules(storeName: string, makeStore: () => AdmissionStore) {
  describe(`admission registry rules on ${storeName}`, () => {
    let siteCounter = 0;
    function setup() {
      // Anchored at real time: entries carry a TTL, and DynamoDB Local's sweeper deletes items whose
      // TTL is already past, which a fixed 2023 clock would make every item.
      const time = new VirtualClock(Date.now());
      const store = new CountingStore(makeStore());
      const metrics = new RecordingMetrics();
      const logger = new RecordingLogger();
      let tokens = 0;
      const site = `site-${Date.now()}-${siteCounter++}`;
      const registryOf = (siteName: string) =>
        new AdmissionRegistry(
          { site: siteName, intervalMs: INTERVAL, claimTtlMs: CLAIM_TTL },
          { store, metrics, logger, clock: time.skewed(), newClaimToken: () => `claim-${tokens++}` },
        );
      return { time, store, metrics, logger, registry: registryOf(site), site, otherSite: () => registryOf(`${site}-other`), sameSite: () => registryOf(site) };
    }

    async function claimed(registry: AdmissionRegistry, identity: string, term = 1): Promise<HostClaim> {
      const work = await registry.admit(identity, "discovery", term);
      if (!work) throw new Error(`expected ${identity} to be admitted`);
      const begun = await registry.begin(work, term);
      if (begun.status !== "claimed") throw new Error(`expected a claim on ${identity}, got ${begun.status}`);
      return begun.claim;
    }

    describe("quarantine (docs/audit.md)", () => {
      const evidence = { reason: "2 different answers to one jwt request", senders: [{ ecdh: "0123456789abcdef" }, { ecdh: "fedcba9876543210" }] };

      it("holds a quarantined host out of admission on every deployment, in every term, until released; released, it is admitted at once", async () => {
        const { registry, time } = setup();
        await registry.quarantine("twin.example.net", evidence, 1, "discovery");
        time.advance(3 * INTERVAL);

        const refused = [await registry.admit("twin.example.net", "discovery", 1), await registry.admit("twin.example.net", "event", 9)];
        const released = await registry.releaseQuarantine("twin.example.net");
        const admitted = await registry.admit("twin.example.net", "discovery", 9);

        expect(refused).toEqual([undefined, undefined]);
        expect(released).toBe(true);
        expect(admitted).toMatchObject({ identity: "twin.example.net", term: 9 });
        expect(await registry.stateOf("twin.example.net")).toBe("queued");
      });

      it("is the site's: after a failover the new leader's registry holds the host back, lists it with its evidence, and its release reaches the old leader's", async () => {
        const { registry: blue, sameSite, time } = setup();
        await blue.quarantine("twin.example.net", evidence, 1, "discovery");
        time.advance(3 * INTERVAL);
        const green = sameSite();

        const refused = await green.admit("twin.example.net", "discovery", 2);
        const names = await green.siteNames();
        const listed = await green.quarantined();
        const released = await green.releaseQuarantine("twin.example.net");
        const admitted = await blue.admit("twin.example.net", "discovery", 2);

        expect(refused).toBeUndefined();
        expect([...names.quarantined]).toEqual(["twin.example.net"]);
        expect(listed).toEqual([{ identity: "twin.example.net", reason: evidence.reason, quarantinedAt: expect.any(Number), senders: evidence.senders }]);
        expect(released).toBe(true);
        expect(admitted).toMatchObject({ identity: "twin.example.net", term: 2 });
      });

      it("ends a worker's claim: work admitted before cannot claim the host, and the claim cannot record it provisioned", async () => {
        const { registry } = setup();
        const claim = await claimed(registry, "twin.example.net", 2);
        const queuedWork = (await registry.admit("other.example.net", "discovery", 2))!;
        await registry.quarantine("twin.example.net", evidence, 2, "discovery");
        await registry.quarantine("other.example.net", evidence, 2, "discovery");

        await registry.complete(claim, "provisioned");
        const begun = await registry.begin(queuedWork, 2);

        expect(await registry.stateOf("twin.example.net")).toBe("quarantined");
        expect(begun.status).not.toBe("claimed");
        expect(await registry.stateOf("other.example.net")).toBe("quarantined");
      });

      it("lists the quarantined hosts with their evidence in the summary, and keeps the credentials of a released host (failed, admissible)", async () => {
        const { registry, time } = setup();
        const claim = await claimed(registry, "rebuilt.example.net");
        const credentials = { expiresAt: time.trueTime + 30 * 86_400_000, kind: "certificate" as const, issuedAt: time.trueTime };
        await registry.complete(claim, "provisioned", credentials);
        time.advance(10);
        await registry.quarantine("rebuilt.example.net", evidence, 1, "event");

        const summary = await registry.summary();
        const released = await registry.releaseQuarantine("rebuilt.example.net");
        const again = await registry.releaseQuarantine("rebuilt.example.net");

        expect(summary.byState.quarantined).toBe(1);
        expect(summary.quarantined).toEqual([{ identity: "rebuilt.example.net", reason: evidence.reason, quarantinedAt: time.trueTime, senders: evidence.senders }]);
        expect([released, again]).toEqual([true, false]);
        expect(await registry.stateOf("rebuilt.example.net")).toBe("failed");
        expect(await registry.credentialsOf("rebuilt.example.net")).toEqual(credentials);
        expect((await registry.siteNames()).quarantined.size).toBe(0);
      });

      it("settles a quarantine whose answer was lost, and a release whose answer was lost, by their own effect", async () => {
        const { registry, store } = setup();
        store.loseNextResponse = true;
        await registry.quarantine("twin.example.net", evidence, 1, "discovery");
        expect(await registry.stateOf("twin.example.net")).toBe("quarantined");

        store.loseNextResponse = true;
        const released = await registry.releaseQuarantine("twin.example.net");

        expect(released).toBe(true);
        expect(await registry.stateOf("twin.example.net")).toBeUndefined();
      });
    });

    it("admits a new host stamped with the current term", async () => {
      const { registry, time } = setup();

      const work = await registry.admit("node-1", "discovery", 4);

      expect(work).toEqual({ identity: "node-1", term: 4, admittedAt: time.trueTime, source: "discovery" });
    });

    it("stamps whole milliseconds even when the clock has a fraction, as host-work messages require", async () => {
      const { registry, time } = setup();
      time.advance(0.75);

      const work = await registry.admit("node-1", "discovery", 4);

      expect(work?.admittedAt).toBe(Math.floor(time.trueTime));
      expect(Number.isInteger(work?.admittedAt)).toBe(true);
    });

    it("does not admit the same host twice within one interval, and admits it again after", async () => {
      const { registry, time } = setup();
      await registry.admit("node-1", "discovery", 1);

      time.advance(INTERVAL - 1);
      const tooSoon = await registry.admit("node-1", "event", 1);
      time.advance(1);
      const later = await registry.admit("node-1", "event", 1);

      expect(tooSoon).toBeUndefined();
      expect(later).toMatchObject({ identity: "node-1", term: 1, source: "event" });
    });

    it("never lets an entry from an older term block the new leader", async () => {
      const { registry, time } = setup();
      await registry.admit("node-1", "discovery", 1);
      await registry.begin((await registry.admit("node-2", "discovery", 1))!, 1);
      time.advance(1_000);

      const queued = await registry.admit("node-1", "discovery", 2);
      const claimed = await registry.admit("node-2", "discovery", 2);

      expect(queued).toMatchObject({ term: 2 });
      expect(claimed).toMatchObject({ term: 2 });
    });

    it("discards work from an older term with a metric and a log line", async () => {
      const { registry, metrics, logger } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;

      const outcome = await registry.begin(work, 2);

      expect(outcome).toEqual({ status: "stale-term" });
      expect(metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(1);
      expect(logger.records.some((record) => record.message.includes("discarding work for node-1"))).toBe(true);
    });

    it("discards work that a newer admission superseded", async () => {
      const { registry, metrics, time } = setup();
      const first = (await registry.admit("node-1", "discovery", 1))!;
      time.advance(INTERVAL);
      const second = (await registry.admit("node-1", "discovery", 1))!;

      const outcomes = [await registry.begin(first, 1), await registry.begin(second, 1)];

      expect(outcomes.map((outcome) => outcome.status)).toEqual(["not-current", "claimed"]);
      expect(metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(1);
    });

    it("skips a host that waited longer than twice the interval, logging an error", async () => {
      const { registry, time, logger } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      time.advance(2 * INTERVAL + 1);

      const outcome = await registry.begin(work, 1);

      expect(outcome).toEqual({ status: "waited-too-long" });
      expect(logger.records).toContainEqual(expect.objectContaining({ level: "error", message: "skipping node that's been waiting 2m0.001s" }));
    });

    it("lets only one of several duplicate deliveries claim the host", async () => {
      const { registry } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;

      const outcomes = await Promise.all([registry.begin(work, 1), registry.begin(work, 1), registry.begin(work, 1)]);

      expect(outcomes.map((outcome) => outcome.status).sort()).toEqual(["already-claimed", "already-claimed", "claimed"]);
    });

    it("lets a duplicate take over the claim of a claimer that crashed, once the claim expires", async () => {
      const { registry, time } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      await registry.begin(work, 1);

      time.advance(CLAIM_TTL - 1);
      const whileClaimed = await registry.begin(work, 1);
      time.advance(1);
      const afterExpiry = await registry.begin(work, 1);

      expect(whileClaimed.status).toBe("already-claimed");
      expect(afterExpiry.status).toBe("claimed");
    });

    it("does not admit a host again while it is being provisioned", async () => {
      const { registry, time } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      await registry.begin(work, 1);
      time.advance(INTERVAL + 1);

      const readmitted = await registry.admit("node-1", "discovery", 1);

      expect(readmitted).toBeUndefined();
    });

    it("keeps a provisioned host known for 60 s and ignores duplicate work for it", async () => {
      const { registry, time } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      const begun = await registry.begin(work, 1);
      time.advance(50_000);
      if (begun.status !== "claimed") throw new Error(`expected a claim, got ${begun.status}`);
      await registry.complete(begun.claim, "provisioned");

      const duplicate = await registry.begin(work, 1);
      time.advance(59_999);
      const heldBack = await registry.admit("node-1", "discovery", 1);
      time.advance(1);
      const readmitted = await registry.admit("node-1", "discovery", 1);

      expect(duplicate.status).toBe("already-provisioned");
      expect(heldBack).toBeUndefined();
      expect(readmitted).toMatchObject({ identity: "node-1" });
    });

    it("forgets a host whose provisioning failed at once", async () => {
      const { registry } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      const begun = await registry.begin(work, 1);
      if (begun.status !== "claimed") throw new Error(`expected a claim, got ${begun.status}`);

      await registry.complete(begun.claim, "failed");
      const readmitted = await registry.admit("node-1", "discovery", 1);

      expect(readmitted).toMatchObject({ identity: "node-1" });
    });

    it("spends three writes on a provisioned host: admit, claim, done", async () => {
      const { registry, store } = setup();

      const work = (await registry.admit("node-1", "discovery", 1))!;
      const begun = await registry.begin(work, 1);
      if (begun.status !== "claimed") throw new Error(`expected a claim, got ${begun.status}`);
      await registry.complete(begun.claim, "provisioned");

      expect(store.writes).toBe(3);
    });

    it("settles a claim whose response was lost with a consistent read", async () => {
      const { registry, store } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      store.loseNextResponse = true;

      const outcome = await registry.begin(work, 1);
      const duplicate = await registry.begin(work, 1);

      expect(outcome.status).toBe("claimed");
      expect(duplicate.status).toBe("already-claimed");
    });

    describe.each(["retried", "lost"] as const)("a write applied but %s is our own success", (disturbance) => {
      type Setup = ReturnType<typeof setup>;
      const HOST = "node-1";
      const stateOf = (s: Setup) => s.store.read({ site: s.site, identity: HOST });
      const noClaimRanOut = (s: Setup) => expect(s.logger.records.filter((record) => record.message.includes("ran out"))).toEqual([]);
      /** Each admission write: `arrange` brings the host to where the write applies, `act` runs it disturbed, `check` looks at the table. */
      const writes: Array<{ write: string; arrange: (s: Setup) => Promise<HostClaim | undefined>; act: (s: Setup, claim?: HostClaim) => Promise<unknown>; check: (s: Setup, result: unknown, claim?: HostClaim) => Promise<void> }> = [
        {
          write: "admit",
          arrange: async () => undefined,
          act: (s) => s.registry.admit(HOST, "discovery", 1),
          check: async (s, result) => {
            expect(result).toMatchObject({ identity: HOST, term: 1 });
            expect(await stateOf(s)).toMatchObject({ state: "queued", term: 1, admittedAt: (result as { admittedAt: number }).admittedAt });
          },
        },
        {
          write: "claim",
          arrange: async (s) => {
            const first = await claimed(s.registry, HOST);
            await s.registry.recordFailure(first, { step: "helper", reason: "broke", failures: 1, park: false });
            await s.registry.admit(HOST, "discovery", 1);
            return undefined;
          },
          act: async (s) => {
            const work = (await s.store.read({ site: s.site, identity: HOST }))!;
            return s.registry.begin({ identity: HOST, term: work.term, admittedAt: work.admittedAt, source: "discovery" }, 1);
          },
          check: async (s, result) => {
            expect(result).toMatchObject({ status: "claimed", claim: { previousFailure: { step: "helper", count: 1 } } });
            const claim = (result as { claim: HostClaim }).claim;
            expect(await stateOf(s)).toMatchObject({ state: "provisioning", claimToken: claim.token });
          },
        },
        {
          write: "mark provisioned",
          arrange: (s) => claimed(s.registry, HOST),
          act: (s, claim) => s.registry.complete(claim!, "provisioned"),
          check: async (s) => {
            expect(await stateOf(s)).toMatchObject({ state: "provisioned" });
            noClaimRanOut(s);
          },
        },
        {
          write: "forget",
          arrange: (s) => claimed(s.registry, HOST),
          act: (s, claim) => s.registry.complete(claim!, "failed"),
          check: async (s) => {
            expect(await stateOf(s)).toBeUndefined();
            noClaimRanOut(s);
          },
        },
        {
          write: "record failure",
          arrange: (s) => claimed(s.registry, HOST),
          act: (s, claim) => s.registry.recordFailure(claim!, { step: "helper", reason: "broke", failures: 3, park: true }),
          check: async (s, result) => {
            expect(result).toBe(true);
            expect(await stateOf(s)).toMatchObject({ state: "parked", failedStep: "helper", failures: 3, lastError: "broke" });
          },
        },
        {
          write: "release claim",
          arrange: (s) => claimed(s.registry, HOST),
          act: (s, claim) => s.registry.retryLater(claim!, "broker unreachable"),
          check: async (s, result, claim) => {
            expect(result).toBe(true);
            expect(await stateOf(s)).toMatchObject({ state: "queued", lastError: "broker unreachable" });
            expect((await s.registry.begin(claim!.work, 1)).status).toBe("claimed");
          },
        },
        {
          write: "forget queued",
          arrange: async (s) => {
            await s.registry.admit(HOST, "discovery", 1);
            return undefined;
          },
          act: async (s) => {
            const entry = (await stateOf(s))!;
            return s.registry.withdraw({ identity: HOST, term: entry.term, admittedAt: entry.admittedAt, source: "discovery" });
          },
          check: async (s, result) => {
            expect(result).toBe(true);
            expect(await stateOf(s)).toBeUndefined();
          },
        },
        {
          write: "record a renewal",
          arrange: async (s) => {
            const claim = await claimed(s.registry, HOST);
            await s.registry.complete(claim, "provisioned", { expiresAt: s.time.now() + 86_400_000, kind: "server_jwt", issuedAt: 1_000 });
            return undefined;
          },
          act: (s) =>
            s.registry.markRenewal(
              { identity: HOST, credentials: { expiresAt: s.time.now() + 86_400_000, kind: "server_jwt", issuedAt: 1_000 } },
              { attempts: 2, retryAt: 5_000, reason: "no answer", at: 4_000 },
            ),
          check: async (s, result) => {
            expect(result).toBe(true);
            expect(await stateOf(s)).toMatchObject({ renewalAttempts: 2, renewalRetryAt: 5_000, renewalError: "no answer", credentialsIssuedAt: 1_000 });
          },
        },
        {
          write: "forget unless claimed",
          arrange: async (s) => {
            await s.registry.admit(HOST, "discovery", 1);
            return undefined;
          },
          act: (s) => s.registry.forgetUnlessClaimed(HOST),
          check: async (s, result) => {
            expect(result).toBe(true);
            expect(await stateOf(s)).toBeUndefined();
          },
        },
      ];

      it.each(writes)("$write", async ({ arrange, act, check }) => {
        const s = setup();
        const claim = await arrange(s);
        s.store.nextWrite = disturbance;

        const result = await act(s, claim);

        await check(s, result, claim);
      });
    });

    it("gives back a claim whose outcome could not be settled, so the redelivery claims the host", async () => {
      const { registry, store } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      store.nextWrite = "lost";
      store.failNextRead = true;

      const unsettled = await registry.begin(work, 1).catch((error: unknown) => error);
      const redelivery = await registry.begin(work, 1);

      expect(unsettled).toBeInstanceOf(AdmissionStoreError);
      expect(redelivery.status).toBe("claimed");
    });

    it("sends a claim again when it threw and the read found the host unclaimed, so a late landing cannot orphan it", async () => {
      const { registry, store, site } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      store.nextWrite = "unapplied";

      const outcome = await registry.begin(work, 1);
      const late = await store.claim(store.lastRequest.claim!);

      expect(outcome.status).toBe("claimed");
      const token = outcome.status === "claimed" ? outcome.claim.token : undefined;
      expect(late).toMatchObject({ applied: false, current: { claimToken: token } });
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "provisioning", claimToken: token });
    });

    it.each([
      { write: "mark provisioned", end: (registry: AdmissionRegistry, claim: HostClaim) => registry.complete(claim, "provisioned", { expiresAt: Date.now() + 3_600_000, kind: "certificate", issuedAt: Date.now() }), state: "provisioned" },
      { write: "record a failure", end: (registry: AdmissionRegistry, claim: HostClaim) => registry.recordFailure(claim, { step: "configure", reason: "refused", failures: 1, park: false }), state: "failed" },
      { write: "give the claim back", end: (registry: AdmissionRegistry, claim: HostClaim) => registry.retryLater(claim, "the broker could not be reached"), state: "queued" },
    ])("sends $write again when it was lost before it applied and the claim is still ours: a lost request is not a claim that ran out", async ({ end, state }) => {
      const { registry, store, site, logger } = setup();
      const claim = await claimed(registry, "node-1");
      store.unappliedWrites = 2;

      await end(registry, claim);

      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state, endedClaimToken: claim.token });
      expect(logger.records.filter((record) => record.message.includes("ran out"))).toEqual([]);
    });

    it("records a claimed host's credentials before they leave, and hands them to renewal once the claim ran out with no outcome", async () => {
      const { registry, time, site, store } = setup();
      const claim = await claimed(registry, "node-1");
      const credentials = { expiresAt: time.now() + 3_600_000, kind: "certificate" as const, issuedAt: time.now() };

      const recorded = await registry.recordCredentials(claim, credentials);
      const whileClaimed = await registry.expiries();
      time.advance(CLAIM_TTL + 1_000);
      const afterClaim = await registry.expiries();

      expect(recorded).toBe(true);
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "provisioning", credentialsExpireAt: credentials.expiresAt, credentialsIssuedAt: credentials.issuedAt });
      expect(whileClaimed).toMatchObject([{ identity: "node-1", state: "provisioning" }]);
      expect(whileClaimed[0]?.abandoned).toBeUndefined();
      expect(afterClaim).toMatchObject([{ identity: "node-1", abandoned: true, credentials }]);
    });

    it.each([
      { end: "a failure", park: false },
      { end: "a parking failure", park: true },
    ])("keeps the entry of a host whose credentials were recorded for as long as they live when the attempt ends in $end", async ({ park }) => {
      // The configure request may have reached the node before the failure was seen: the node is then in
      // service on the recorded credentials, and the table's expiry must not delete what renewal needs.
      const { registry, time, site, store } = setup();
      const claim = await claimed(registry, "node-1");
      const credentials = { expiresAt: time.now() + 30 * 86_400_000, kind: "certificate" as const, issuedAt: time.now() };
      await registry.recordCredentials(claim, credentials);

      await registry.recordFailure(claim, { step: "configure", reason: "no reply", failures: 1, park });

      expect((await store.read({ site, identity: "node-1" }))?.expiresAt).toBeGreaterThan(credentials.expiresAt);
    });

    it("keeps a host with recorded credentials when its attempt ends without an outcome, admissible again at once", async () => {
      const { registry, time, site, store } = setup();
      const first = await claimed(registry, "node-1");
      const credentials = { expiresAt: time.now() + 3_600_000, kind: "certificate" as const, issuedAt: time.now() };
      await registry.complete(first, "provisioned", credentials);
      time.advance(61_000);
      const again = await claimed(registry, "node-1", 2);

      await registry.complete(again, "failed");
      const readmitted = await registry.admit("node-1", "discovery", 2);

      expect(await registry.expiries()).toMatchObject([{ identity: "node-1", credentials }]);
      expect(readmitted).toMatchObject({ identity: "node-1", term: 2 });
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ credentialsExpireAt: credentials.expiresAt });
    });

    it.each(["lost", "retried", "unapplied"] as const)("recognises its own credentials record when the write's outcome was unknown (%s)", async (disturbance) => {
      const { registry, time, site, store } = setup();
      const claim = await claimed(registry, "node-1");
      const credentials = { expiresAt: time.now() + 3_600_000, kind: "certificate" as const, issuedAt: time.now() };
      store.nextWrite = disturbance;

      const recorded = await registry.recordCredentials(claim, credentials);
      time.advance(CLAIM_TTL + 1_000);

      expect(recorded).toBe(true);
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "provisioning", credentialsIssuedAt: credentials.issuedAt });
      expect(await registry.expiries()).toMatchObject([{ identity: "node-1", abandoned: true, credentials }]);
    });

    it.each(["answered", "lost"] as const)(
      "keeps the credentials of a provisioned host admitted again when it withdraws that admission (write %s)",
      async (disturbance) => {
        const { registry, time, site, store } = setup();
        const claim = await claimed(registry, "node-1");
        const credentials = { expiresAt: time.now() + 3_600_000, kind: "certificate" as const, issuedAt: time.now() };
        await registry.complete(claim, "provisioned", credentials);
        const again = (await registry.admit("node-1", "event", 2))!;
        store.nextWrite = disturbance === "answered" ? undefined : disturbance;

        const withdrawn = await registry.withdraw(again);

        expect(withdrawn).toBe(true);
        expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "failed", credentialsIssuedAt: credentials.issuedAt });
        expect(await registry.expiries()).toMatchObject([{ identity: "node-1", credentials }]);
        expect(await registry.admit("node-1", "discovery", 2)).toMatchObject({ identity: "node-1", term: 2 });
      },
    );

    it("refuses to record credentials under a claim that is no longer ours", async () => {
      const { registry, time } = setup();
      const claim = await claimed(registry, "node-1");
      await registry.complete(claim, "failed");

      const recorded = await registry.recordCredentials(claim, { expiresAt: time.now() + 3_600_000, kind: "certificate", issuedAt: time.now() });

      expect(recorded).toBe(false);
    });

    it("sends an admission again when it threw and the read found no entry, so its late landing is ours", async () => {
      const { registry, store, site } = setup();
      store.unappliedWrites = 1;
      const original = registry.admit("node-1", "discovery", 1);

      const work = await original;
      const late = await store.admit(store.lastRequest.admit!);

      expect(work).toMatchObject({ identity: "node-1", term: 1 });
      expect(late.applied).toBe(false);
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "queued", admittedAt: work!.admittedAt });
    });

    it("voids a claim whose outcome stayed unknown, so its copy landing after the give-back cannot orphan the host", async () => {
      const { registry, store, site } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      store.unappliedWrites = 2; // the claim and the claim sent again both time out unapplied

      const unsettled = await registry.begin(work, 1).catch((error: unknown) => error);
      const late = await store.claim(store.lastRequest.claim!);
      const redelivery = await registry.begin(work, 1);

      expect(unsettled).toBeInstanceOf(AdmissionStoreError);
      expect(late.applied).toBe(false);
      expect(redelivery.status).toBe("claimed");
      const token = redelivery.status === "claimed" ? redelivery.claim.token : undefined;
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "provisioning", claimToken: token });
    });

    it("gives back a claim whose outcome stayed unknown when it landed before the void", async () => {
      const { registry, store, site } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      store.unappliedWrites = 2;
      const voidClaim = store.voidClaim;
      store.voidClaim = async (request) => {
        store.voidClaim = voidClaim;
        await store.claim(store.lastRequest.claim!); // the late copy lands between the give-back and the void
        return voidClaim(request);
      };

      const unsettled = await registry.begin(work, 1).catch((error: unknown) => error);
      const redelivery = await registry.begin(work, 1);

      expect(unsettled).toBeInstanceOf(AdmissionStoreError);
      expect(redelivery.status).toBe("claimed");
      const token = redelivery.status === "claimed" ? redelivery.claim.token : undefined;
      expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "provisioning", claimToken: token });
    });

    it("never lets a late duplicate of a claim that was given back take the host again", async () => {
      const { registry, store } = setup();
      const claim = await claimed(registry, "node-1");
      const original = store.lastRequest.claim!;
      await registry.retryLater(claim, "broker unreachable");

      const late = await store.claim(original);
      const redelivery = await registry.begin(claim.work, 1);

      expect(late.applied).toBe(false);
      expect(redelivery.status).toBe("claimed");
    });

    it("never lets a late duplicate of an admission apply again once its host failed", async () => {
      const { registry, store } = setup();
      const work = (await registry.admit("node-1", "discovery", 1))!;
      const original = store.lastRequest.admit!;
      const begun = await registry.begin(work, 1);
      if (begun.status !== "claimed") throw new Error(`expected a claim, got ${begun.status}`);
      await registry.recordFailure(begun.claim, { step: "helper", reason: "broke", failures: 1, park: false });

      const late = await store.admit(original);
      const readmitted = await registry.admit("node-1", "discovery", 1);

      expect(late.applied).toBe(false);
      expect(readmitted).toMatchObject({ identity: "node-1" });
    });

    it("does not take a concurrent admission of the same host in the same millisecond for its own", async () => {
      const { registry, time } = setup();
      const first = await registry.admit("node-1", "discovery", 1);

      const second = await registry.admit("node-1", "event", 1);

      expect(first).toEqual({ identity: "node-1", term: 1, admittedAt: time.trueTime, source: "discovery" });
      expect(second).toBeUndefined();
    });

    describe("hard failures and parking", () => {
      /** One attempt of `identity` that fails at `step`; parks it when the count reaches `limit`. */
      async function failOnce(registry: AdmissionRegistry, identity: string, step: string, limit = 3, term = 1) {
        const claim = await claimed(registry, identity, term);
        const failures = failuresInARow(claim, step);
        const applied = await registry.recordFailure(claim, { step, reason: `${step} broke`, failures, park: failures >= limit });
        return { claim, failures, applied };
      }

      it("lets a failed host be admitted again at once, keeping its failure count", async () => {
        const { registry } = setup();

        const first = await failOnce(registry, "node-1", "helper");
        const second = await failOnce(registry, "node-1", "helper");

        expect(first).toMatchObject({ failures: 1, applied: true });
        expect(second.claim.previousFailure).toEqual({ step: "helper", count: 1 });
        expect(second.failures).toBe(2);
      });

      it("starts the count again when the host fails at another step", async () => {
        const { registry } = setup();
        await failOnce(registry, "node-1", "helper");
        await failOnce(registry, "node-1", "helper");

        const other = await failOnce(registry, "node-1", "configure");

        expect(other.failures).toBe(1);
      });

      it("parks a host at the limit: no admission, not even under a newer term, until the park runs out", async () => {
        const { registry, time } = setup();
        for (let attempt = 0; attempt < 3; attempt++) await failOnce(registry, "node-1", "helper");

        const sameTerm = await registry.admit("node-1", "discovery", 1);
        const newerTerm = await registry.admit("node-1", "event", 2);
        time.advance(14 * 24 * 3_600_000 + 1);
        const afterPark = await registry.admit("node-1", "discovery", 2);

        expect(sameTerm).toBeUndefined();
        expect(newerTerm).toBeUndefined();
        expect(afterPark).toMatchObject({ identity: "node-1", term: 2 });
      });

      it("shows a parked host with its step, count and last error in the summary", async () => {
        const { registry } = setup();
        for (let attempt = 0; attempt < 3; attempt++) await failOnce(registry, "node-1", "helper");

        const summary = await registry.summary();

        expect(summary.byState.parked).toBe(1);
        expect(summary.lastErrors).toEqual([
          expect.objectContaining({ identity: "node-1", state: "parked", failedStep: "helper", failures: 3, lastError: "helper broke" }),
        ]);
      });

      it("clears the failure record when the host is provisioned", async () => {
        const { registry, time } = setup();
        await failOnce(registry, "node-1", "helper");
        await registry.complete(await claimed(registry, "node-1"), "provisioned");
        time.advance(INTERVAL + 1);

        const claim = await claimed(registry, "node-1");

        expect(claim.previousFailure).toBeUndefined();
        expect((await registry.summary()).lastErrors).toEqual([]);
      });

      it("lets the operator forget a parked host, which comes back with a clean record", async () => {
        const { registry } = setup();
        for (let attempt = 0; attempt < 3; attempt++) await failOnce(registry, "node-1", "helper");

        const forgotten = await registry.forgetUnlessClaimed("node-1");
        const claim = await claimed(registry, "node-1");

        expect(forgotten).toBe(true);
        expect(claim.previousFailure).toBeUndefined();
      });

      it("does not record a failure under a claim that ran out", async () => {
        const { registry, time } = setup();
        const claim = await claimed(registry, "node-1");
        time.advance(CLAIM_TTL + 1);
        await claimed(registry, "node-1");

        const applied = await registry.recordFailure(claim, { step: "helper", reason: "late", failures: 1, park: false });

        expect(applied).toBe(false);
      });
    });

    describe("retryLater", () => {
      it("gives the claim back so a redelivery of the same work can claim the host again", async () => {
        const { registry } = setup();
        const claim = await claimed(registry, "node-1");

        const released = await registry.retryLater(claim, "helper timed out");
        const redelivery = await registry.begin(claim.work, 1);

        expect(released).toBe(true);
        expect(redelivery.status).toBe("claimed");
      });

      it("keeps the admission, so the host is not admitted again within the interval", async () => {
        const { registry, time } = setup();
        const claim = await claimed(registry, "node-1");
        await registry.retryLater(claim, "broker unreachable");
        time.advance(INTERVAL - 1);

        const readmitted = await registry.admit("node-1", "discovery", 1);

        expect(readmitted).toBeUndefined();
      });

      it("records the reason and when, shown by the summary as queued", async () => {
        const { registry, time } = setup();
        const claim = await claimed(registry, "node-1", 3);
        time.advance(5_000);

        await registry.retryLater(claim, "helper timed out");
        const summary = await registry.summary();

        expect(summary.byState).toEqual({ queued: 1, provisioning: 0, provisioned: 0, failed: 0, parked: 0, quarantined: 0 });
        expect(summary.lastErrors).toEqual([{ identity: "node-1", term: 3, state: "queued", lastError: "helper timed out", lastErrorAt: time.trueTime }]);
      });

      it("records at most 1000 characters of the reason, and 'unknown' for an empty one", async () => {
        const { registry } = setup();
        const long = await claimed(registry, "node-long");
        const empty = await claimed(registry, "node-empty");

        await registry.retryLater(long, "x".repeat(1_500));
        await registry.retryLater(empty, "");
        const errors = new Map((await registry.summary()).lastErrors.map((error) => [error.identity, error.lastError]));

        expect(errors.get("node-long")).toBe("x".repeat(1_000));
        expect(errors.get("node-empty")).toBe("unknown");
      });

      it("refuses a claim that ran out and was taken over, leaving the new claim in place", async () => {
        const { registry, time } = setup();
        const stale = await claimed(registry, "node-1");
        time.advance(CLAIM_TTL);
        const takeover = await registry.begin(stale.work, 1);

        const released = await registry.retryLater(stale, "too late");
        const duplicate = await registry.begin(stale.work, 1);

        expect(takeover.status).toBe("claimed");
        expect(released).toBe(false);
        expect(duplicate.status).toBe("already-claimed");
      });
    });

    describe("withdraw", () => {
      it("undoes an admission whose work was not queued, so the host is admitted again at once", async () => {
        const { registry } = setup();
        const work = (await registry.admit("node-1", "discovery", 1))!;

        const withdrawn = await registry.withdraw(work);
        const readmitted = await registry.admit("node-1", "discovery", 1);

        expect(withdrawn).toBe(true);
        expect(readmitted).toMatchObject({ identity: "node-1", term: 1 });
      });

      it("leaves a newer admission of the same host alone", async () => {
        const { registry, time } = setup();
        const first = (await registry.admit("node-1", "discovery", 1))!;
        time.advance(INTERVAL);
        const second = (await registry.admit("node-1", "discovery", 1))!;

        const withdrawn = await registry.withdraw(first);
        const outcome = await registry.begin(second, 1);

        expect(withdrawn).toBe(false);
        expect(outcome.status).toBe("claimed");
      });

      it("leaves a claimed host alone", async () => {
        const { registry } = setup();
        const claim = await claimed(registry, "node-1");

        const withdrawn = await registry.withdraw(claim.work);
        const duplicate = await registry.begin(claim.work, 1);

        expect(withdrawn).toBe(false);
        expect(duplicate.status).toBe("already-claimed");
      });

      it("reports a host it does not know as withdrawn: an earlier attempt of the same delete cannot be told apart, and nothing blocks its admission", async () => {
        const { registry, time } = setup();

        const withdrawn = await registry.withdraw({ identity: "node-unknown", term: 1, admittedAt: time.trueTime, source: "discovery" });
        const admitted = await registry.admit("node-unknown", "discovery", 1);

        expect(withdrawn).toBe(true);
        expect(admitted).toMatchObject({ identity: "node-unknown" });
      });
    });

    describe("forgetUnlessClaimed", () => {
      it("forgets a queued host so the operator can admit it again within the interval", async () => {
        const { registry } = setup();
        await registry.admit("node-1", "discovery", 1);

        const forgotten = await registry.forgetUnlessClaimed("node-1");
        const readmitted = await registry.admit("node-1", "operator", 1);

        expect(forgotten).toBe(true);
        expect(readmitted).toMatchObject({ identity: "node-1", source: "operator" });
      });

      it("forgets a provisioned host still within its hold", async () => {
        const { registry } = setup();
        const claim = await claimed(registry, "node-1");
        await registry.complete(claim, "provisioned");

        const forgotten = await registry.forgetUnlessClaimed("node-1");
        const readmitted = await registry.admit("node-1", "operator", 1);

        expect(forgotten).toBe(true);
        expect(readmitted).toMatchObject({ identity: "node-1" });
      });

      it.each(["answered", "lost", "unapplied"] as const)(
        "keeps the credentials of a provisioned host it forgets, so renewal still knows them after the operator's attempt fails (write %s)",
        async (disturbance) => {
          const { registry, time, site, store } = setup();
          const claim = await claimed(registry, "node-1");
          const credentials = { expiresAt: time.now() + 3_600_000, kind: "certificate" as const, issuedAt: time.now() };
          await registry.complete(claim, "provisioned", credentials);
          store.nextWrite = disturbance === "answered" ? undefined : disturbance;

          const forgotten = await registry.forgetUnlessClaimed("node-1");
          const again = await claimed(registry, "node-1");
          await registry.recordFailure(again, { step: "configure", reason: "the node did not answer", failures: 1, park: false });

          expect(forgotten).toBe(true);
          expect(await store.read({ site, identity: "node-1" })).toMatchObject({ state: "failed", credentialsIssuedAt: credentials.issuedAt, failures: 1 });
          expect(await registry.expiries()).toMatchObject([{ identity: "node-1", credentials }]);
        },
      );

      it("refuses while a worker holds an unexpired claim, and forgets once it runs out", async () => {
        const { registry, time } = setup();
        await claimed(registry, "node-1");

        time.advance(CLAIM_TTL - 1);
        const whileClaimed = await registry.forgetUnlessClaimed("node-1");
        time.advance(1);
        const afterExpiry = await registry.forgetUnlessClaimed("node-1");

        expect(whileClaimed).toBe(false);
        expect(afterExpiry).toBe(true);
      });

      it("forgets a host whose claim was given back for a retry", async () => {
        const { registry } = setup();
        const claim = await claimed(registry, "node-1");
        await registry.retryLater(claim, "helper failed");

        const forgotten = await registry.forgetUnlessClaimed("node-1");

        expect(forgotten).toBe(true);
      });

      it("succeeds for a host it does not know", async () => {
        const { registry } = setup();

        const forgotten = await registry.forgetUnlessClaimed("node-unknown");

        expect(forgotten).toBe(true);
      });
    });

    describe("names waiting for discovery", () => {
      const waitingName = (identity: string, seenAt: number) => ({ identity, firstSeen: seenAt - 1_000, lastSeen: seenAt });

      it("remembers the names in the order given, per site, and has none before", async () => {
        const { registry, otherSite, time } = setup();
        const before = await registry.waitingNames();
        const names = [waitingName("node-b", time.trueTime), waitingName("node-a", time.trueTime - 10), waitingName("node-c", time.trueTime)];

        await registry.rememberWaiting(names);

        expect(before).toEqual([]);
        expect(await registry.waitingNames()).toEqual(names);
        expect(await otherSite().waitingNames()).toEqual([]);
      });

      it("keeps them apart from the hosts: not listed, not summarised, not known", async () => {
        const { registry, store, site, time } = setup();
        await registry.admit("node-admitted", "discovery", 1);

        await registry.rememberWaiting([waitingName("node-waiting", time.trueTime)]);

        expect([...(await registry.siteNames()).known]).toEqual(["node-admitted"]);
        expect((await registry.summary()).total).toBe(1);
        expect((await store.listSite(site)).map((row) => row.identity)).toEqual(["node-admitted"]);
      });

      it("replaces the list each time, and an empty list forgets it", async () => {
        const { registry, time } = setup();
        await registry.rememberWaiting([waitingName("node-a", time.trueTime), waitingName("node-b", time.trueTime)]);

        await registry.rememberWaiting([waitingName("node-c", time.trueTime)]);
        const replaced = await registry.waitingNames();
        await registry.rememberWaiting([]);

        expect(replaced.map((name) => name.identity)).toEqual(["node-c"]);
        expect(await registry.waitingNames()).toEqual([]);
      });

      it("forgets a name no discovery saw for three intervals, on writing and on reading", async () => {
        const { registry, time } = setup();
        const now = time.trueTime;
        await registry.rememberWaiting([waitingName("node-stale", now - 3 * INTERVAL - 1), waitingName("node-old", now - 2 * INTERVAL), waitingName("node-new", now)]);
        const written = await registry.waitingNames();

        time.advance(INTERVAL + 1);
        const later = await registry.waitingNames();

        expect(written.map((name) => name.identity)).toEqual(["node-old", "node-new"]);
        expect(later.map((name) => name.identity)).toEqual(["node-new"]);
      });

      it("keeps each name once and the list within WAITING_MAX_BYTES, the first names given kept, whatever length the names have", async () => {
        const { registry, time } = setup();
        const long = (index: number) => `node-${index}.`.padEnd(255, "x");
        const names = [waitingName(long(0), time.trueTime), ...Array.from({ length: 1_200 }, (_, index) => waitingName(long(index), time.trueTime))];

        await registry.rememberWaiting(names);
        const kept = await registry.waitingNames();

        expect(kept.length).toBeGreaterThan(800);
        expect(kept.length * 255).toBeLessThan(WAITING_MAX_BYTES);
        expect(kept.map((name) => name.identity)).toEqual(Array.from({ length: kept.length }, (_, index) => long(index)));
      });

      it("names the failure of the store, with its cause, when the names cannot be read or written", async () => {
        const { registry, store, time } = setup();

        store.failNextWaiting = true;
        const readError = await registry.waitingNames().catch((caught: unknown) => caught);
        store.failNextWaiting = true;
        const writeError = await registry.rememberWaiting([waitingName("node-a", time.trueTime)]).catch((caught: unknown) => caught);

        expect(readError).toBeInstanceOf(AdmissionStoreError);
        expect((readError as Error).cause).toEqual(new Error("ProvisionedThroughputExceededException"));
        expect(writeError).toBeInstanceOf(AdmissionStoreError);
        expect(await registry.waitingNames()).toEqual([]);
      });
    });

    describe("summary", () => {
      it("counts this site's hosts by state and leaves other sites out", async () => {
        const { registry, otherSite } = setup();
        await registry.admit("node-queued", "discovery", 1);
        await claimed(registry, "node-provisioning");
        await registry.complete(await claimed(registry, "node-provisioned"), "provisioned");
        await otherSite().admit("node-elsewhere", "discovery", 1);

        const summary = await registry.summary();

        expect(summary).toEqual({ total: 3, byState: { queued: 1, provisioning: 1, provisioned: 1, failed: 0, parked: 0, quarantined: 0 }, lastErrors: [], provisioningJwts: { windowMs: 30 * DAY_MS, expiring: 0, expired: 0, issuers: [] }, quarantined: [] });
      });

      it("is empty for a site without hosts", async () => {
        const { registry } = setup();

        const summary = await registry.summary();

        expect(summary).toEqual({ total: 0, byState: { queued: 0, provisioning: 0, provisioned: 0, failed: 0, parked: 0, quarantined: 0 }, lastErrors: [], provisioningJwts: { windowMs: 30 * DAY_MS, expiring: 0, expired: 0, issuers: [] }, quarantined: [] });
      });

      it("lists the most recent failures first and at most LAST_ERRORS_SHOWN of them", async () => {
        const { registry, time } = setup();
        const failures = LAST_ERRORS_SHOWN + 2;
        const failedAt: Array<{ identity: string; at: number }> = [];
        for (let index = 0; index < failures; index++) {
          const identity = `node-${String((index * 7) % failures).padStart(3, "0")}`;
          const claim = await claimed(registry, identity);
          time.advance(10);
          await registry.retryLater(claim, `failure of ${identity}`);
          failedAt.push({ identity, at: time.trueTime });
        }

        const summary = await registry.summary();

        const newestFirst = failedAt.sort((a, b) => b.at - a.at).slice(0, LAST_ERRORS_SHOWN);
        expect(summary.total).toBe(failures);
        expect(summary.lastErrors.map((error) => [error.identity, error.lastErrorAt])).toEqual(
          newestFirst.map((failure) => [failure.identity, failure.at]),
        );
      });
    });

    describe("the provisioning JWT a node presented (the bootstrap expiry forecast)", () => {
      it("records its issuer and expiry with the end of a provisioning, and the summary counts it expiring within 30 days", async () => {
        const { registry, store, site, time } = setup();
        const expiresAt = time.trueTime + 10 * DAY_MS;

        await registry.complete(await claimed(registry, "node-expiring"), "provisioned", undefined, { issuer: "image-2025", expiresAt });
        await registry.complete(await claimed(registry, "node-later"), "provisioned", undefined, { issuer: "image-2025", expiresAt: time.trueTime + 300 * DAY_MS });

        expect(await store.read({ site, identity: "node-expiring" })).toMatchObject({ provisioningJwtIssuer: "image-2025", provisioningJwtExpiresAt: expiresAt });
        const forecast = (await registry.summary()).provisioningJwts;
        expect(forecast).toEqual({
          windowMs: 30 * DAY_MS,
          expiring: 1,
          expired: 0,
          issuers: [{ issuer: "image-2025", hosts: 2, expiring: 1, expired: 0, nextExpiresAt: expiresAt }],
        });
        expect((await registry.siteNames()).provisioningJwts).toEqual(forecast);
      });

      it("records an expired one with the failure it caused, and the summary counts it expired", async () => {
        const { registry, store, site, time } = setup();
        const expiredAt = time.trueTime - 3_600_000;

        const recorded = await registry.recordFailure(await claimed(registry, "node-stale-image"), {
          step: "jwt",
          reason: "could not validate JWT: token is expired",
          failures: 1,
          park: false,
          provisioningJwt: { issuer: "", expiresAt: expiredAt },
        });

        expect(recorded).toBe(true);
        expect(await store.read({ site, identity: "node-stale-image" })).toMatchObject({ state: "failed", failedStep: "jwt", provisioningJwtIssuer: "", provisioningJwtExpiresAt: expiredAt });
        expect((await registry.summary()).provisioningJwts).toEqual({
          windowMs: 30 * DAY_MS,
          expiring: 0,
          expired: 1,
          issuers: [{ issuer: "", hosts: 1, expiring: 0, expired: 1 }],
        });
      });

      it("keeps the one recorded across re-admission and an end that presents none, and replaces it with the next one presented", async () => {
        const { registry, store, site, time } = setup();
        const first = { issuer: "image-2025", expiresAt: time.trueTime + 10 * DAY_MS };
        const next = { issuer: "image-2026", expiresAt: time.trueTime + 365 * DAY_MS };
        await registry.recordFailure(await claimed(registry, "node-1"), { step: "helper", reason: "helper failed", failures: 1, park: false, provisioningJwt: first });

        const claim = await claimed(registry, "node-1", 2);
        const kept = await store.read({ site, identity: "node-1" });
        await registry.complete(claim, "provisioned");
        const keptAfterEnd = await store.read({ site, identity: "node-1" });
        time.advance(2 * INTERVAL);
        await registry.complete(await claimed(registry, "node-1", 3), "provisioned", undefined, next);

        expect(kept).toMatchObject({ provisioningJwtIssuer: first.issuer, provisioningJwtExpiresAt: first.expiresAt });
        expect(keptAfterEnd).toMatchObject({ state: "provisioned", provisioningJwtIssuer: first.issuer, provisioningJwtExpiresAt: first.expiresAt });
        expect(await store.read({ site, identity: "node-1" })).toMatchObject({ provisioningJwtIssuer: next.issuer, provisioningJwtExpiresAt: next.expiresAt });
      });
    });
  });
}
