import { describe, expect, it } from "vitest";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import { HostWorkProcessor } from "../../../lib/app/host-work";
import { decodeHostWork, encodeHostWork } from "../../../lib/app/host-work-message";
import type { QueueMessage } from "../../../lib/app/use-case-ports";
import type { ProvisionEngine } from "../../../lib/engine/provision";
import type { ProvisionOutcome } from "../../../lib/engine/outcome";
import { RpcRetriesExhaustedError } from "../../../lib/engine/errors";
import { assertGateOpen } from "../../../lib/engine/retry";
import { AttemptExceedsLeaseError, DeferredError, HelperError, LeaseStoreError, PausedError, RpcTransportError, type ProvisionerError } from "../../../lib/errors";
import { createLeaseGate } from "../../../lib/lease/gate";
import { MemoryPauseStore } from "../../support/stores/memory-pause-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import type { HostWork } from "../../../lib/ports/host-work";
import { FakeEngine, failedIds, VirtualClock } from "../../support/fakes";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { MemoryIssuanceLedger } from "../../support/stores/memory-issuance-ledger";
import { MemoryAdmissionStore } from "../../support/stores/memory-admission-store";
import type { HostExpiry } from "../../../lib/admission/site-listing";
import { renewalApplies } from "../../../lib/app/renewal-state";
import type { CredentialsExpiry } from "../../../lib/ports/credentials";
import type { IssuanceLedger, IssuedCredentials } from "../../../lib/ports/issuance-ledger";
import { blippingAdmissionStore, blippingLeaseStore, context, INTERVAL_MS, shared, SITE, unreachableLeaseStore, world, type World } from "./support";

const RETRY = { baseDelaySeconds: 10, maxDelaySeconds: 60 };
/** The re-reads after a store blip wait 1, 2, 4 and 8 s: a blip under load passes in about a second, a longer one gets 15 s. */
const STORE_BLIP_PAUSES_MS = [1_000, 2_000, 4_000, 8_000];

const LEDGER_RETENTION_MS = 400 * 86_400_000;

function processor(w: World, engine: Pick<ProvisionEngine, "provision">, workers = 4, retry = RETRY, ledger: Pick<IssuanceLedger, "record"> = new MemoryIssuanceLedger()): HostWorkProcessor {
  return new HostWorkProcessor({
    settings: { deploymentId: w.deploymentId, workers, retry, failureLimit: 3, deadlineMarginMs: 1_000, site: SITE, ledgerRetentionMs: LEDGER_RETENTION_MS },
    gate: w.gate,
    registry: w.registry,
    engine,
    ledger,
    broker: w.broker,
    hostWork: w.queues.hostWork,
    hostWorkDlq: w.queues.hostWorkDlq,
    logger: w.logger,
    metrics: w.metrics,
    clock: w.clock,
  });
}

/** What the engine would record of a certificate with these credentials' expiry. */
function issuedFor(credentials: CredentialsExpiry, credentialId = "AB:CD"): IssuedCredentials {
  const certificate = { serial: "01", sha256: credentialId, issuer: "CN=Test CA", subject: "CN=host", notAfter: credentials.expiresAt, keySha256: "00" };
  return { credentialId, issuedAt: credentials.issuedAt, certificate, verdictSha256: "ff" };
}

/** The store's calls as plain functions bound to it, to override one of them. */
function bindAll(store: MemoryLeaseStore): LeaseStore {
  return {
    claim: (request) => store.claim(request),
    extend: (request) => store.extend(request),
    release: (request) => store.release(request),
    markAnnounced: (request) => store.markAnnounced(request),
    recordPeer: (request) => store.recordPeer(request),
    read: (site) => store.read(site),
  };
}

/** An engine whose every host takes one gate read (as the real engine does before an RPC attempt) and is provisioned if it opens. */
function gateReadingEngine(w: World, attemptMs: number): Pick<ProvisionEngine, "provision"> & { tries: string[] } {
  const tries: string[] = [];
  return {
    tries,
    provision: async (work) => {
      tries.push(work.identity);
      try {
        await assertGateOpen(w.gate, work.term, attemptMs, "choria_provision#jwt");
      } catch (error) {
        if (error instanceof PausedError) return { kind: "paused", identity: work.identity, step: "jwt", error };
        throw error;
      }
      return { kind: "provisioned", identity: work.identity };
    },
  };
}

/** Admits the hosts under the deployment's current term and returns their queued work as deliveries. */
async function admitted(w: World, ...identities: string[]): Promise<QueueMessage[]> {
  const term = await w.gate.currentTerm();
  const result = await w.admission.admitAndEnqueue(identities, "discovery", term!);
  return result.queued.map((work) => w.queues.hostWork.delivery(encodeHostWork(work)));
}

/** A failure at the helper step that a retry would not cure. */
function hardFailure(error: ProvisionerError): (work: HostWork) => ProvisionOutcome {
  return (work) => ({ kind: "failed", identity: work.identity, step: "helper", error, retryable: false });
}

async function stateOf(w: World, identity: string) {
  return w.admissionStore.read({ site: SITE, identity });
}

describe("host work: provisioning one queued host", () => {
  it("claims current work, prepares the broker, provisions the host and records it as provisioned", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    const messages = await admitted(w, "a.example.net", "b.example.net");

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(engine.provisioned.map((work) => work.identity).sort()).toEqual(["a.example.net", "b.example.net"]);
    expect(w.broker.rpcPrepared).toBe(2);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
  });

  it("records the expiry of the credentials the host was given, for renewal", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now() };
    engine.outcome = (work) => ({ kind: "provisioned", identity: work.identity, credentials });
    const messages = await admitted(w, "a.example.net");

    // Act
    await processor(w, engine).handle(messages, context());

    // Assert
    expect(await stateOf(w, "a.example.net")).toMatchObject({
      state: "provisioned",
      credentialsExpireAt: credentials.expiresAt,
      expiryKind: "certificate",
      credentialsIssuedAt: credentials.issuedAt,
    });
  });

  it("writes the issuance to the ledger before the credentials to the registry: provision first, renewal once the host holds credentials", async () => {
    // Arrange: an engine that records credentials as the real one does, a new credential each run.
    const w = world();
    const ledger = new MemoryIssuanceLedger();
    const registryHeld: Array<string | undefined> = [];
    let run = 0;
    const engine: Pick<ProvisionEngine, "provision"> = {
      provision: async (work, options) => {
        run += 1;
        const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now(), credentialId: `AB:0${run}` };
        await options?.recordCredentials?.(credentials, issuedFor(credentials, credentials.credentialId));
        registryHeld.push((await stateOf(w, work.identity))?.credentialId);
        return { kind: "provisioned", identity: work.identity, credentials };
      },
    };

    // Act: provisioned, then (its entry kept with the credentials, as a forget does) provisioned again.
    await processor(w, engine, 4, RETRY, ledger).handle(await admitted(w, "a.example.net"), context());
    await w.admissionStore.forgetUnlessClaimed({ site: SITE, identity: "a.example.net", now: w.clock.now() });
    await processor(w, engine, 4, RETRY, ledger).handle(await admitted(w, "a.example.net"), context());

    // Assert: two records, each written before the registry held its credential, the second a renewal.
    const history = await ledger.history(SITE, "a.example.net");
    expect(history.map((record) => [record.credentialId, record.kind])).toEqual([
      ["AB:01", "provision"],
      ["AB:02", "renewal"],
    ]);
    expect(registryHeld).toEqual(["AB:01", "AB:02"]);
    const term = await w.gate.currentTerm();
    expect(history[0]).toMatchObject({ site: SITE, identity: "a.example.net", term, deploymentId: w.deploymentId, expiresAt: history[0]!.issuedAt + LEDGER_RETENTION_MS });
    expect((await stateOf(w, "a.example.net"))?.credentialId).toBe("AB:02");
  });

  it("costs five writes per host provisioned with expiring credentials: admit, claim, ledger record, credentials, the end", async () => {
    // Arrange: every write to the admission store and the ledger is counted, in order; reads are not writes.
    const writes: string[] = [];
    const reads = new Set(["read", "listSite", "readWaiting"]);
    const admissionStore = new Proxy(new MemoryAdmissionStore(), {
      get(target, name, receiver) {
        const member: unknown = Reflect.get(target, name, receiver);
        if (typeof member !== "function" || typeof name !== "string" || reads.has(name)) return member;
        return (...args: unknown[]) => {
          writes.push(name);
          return (member as (...parameters: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const w = world({ shared: shared({ admissionStore }) });
    const ledger = new MemoryIssuanceLedger();
    const countedLedger: Pick<IssuanceLedger, "record"> = {
      record: (record) => {
        writes.push("ledger.record");
        return ledger.record(record);
      },
    };
    const engine: Pick<ProvisionEngine, "provision"> = {
      provision: async (work, options) => {
        const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now(), credentialId: "AB:01" };
        await options?.recordCredentials?.(credentials, issuedFor(credentials, credentials.credentialId));
        return { kind: "provisioned", identity: work.identity, credentials };
      },
    };

    // Act
    await processor(w, engine, 4, RETRY, countedLedger).handle(await admitted(w, "a.example.net"), context());

    // Assert: docs/behaviour.md §2 "Writes per host" says what each one pays for.
    expect(writes).toEqual(["admit", "claim", "ledger.record", "recordCredentials", "markProvisioned"]);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
  });

  it("ends the claim with the attempt: a host provisioned a moment ago may be forgotten at once, and is admitted again after its hold and interval", async () => {
    // Arrange: an engine that records credentials before configure, as the real one does.
    const w = world();
    const engine: Pick<ProvisionEngine, "provision"> = {
      provision: async (work, options) => {
        const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now(), credentialId: `AB:${work.identity}` };
        await options?.recordCredentials?.(credentials, issuedFor(credentials, credentials.credentialId));
        return { kind: "provisioned", identity: work.identity, credentials };
      },
    };
    const term = (await w.gate.currentTerm())!;
    await processor(w, engine).handle(await admitted(w, "a.example.net", "b.example.net"), context());

    // Act: the operator forgets one at once; the other comes back in provisioning mode after its interval (longer than the 60 s hold).
    const forgotten = await w.registry.forgetUnlessClaimed("a.example.net");
    w.clock.advance(INTERVAL_MS);
    const again = await w.registry.admit("b.example.net", "discovery", term);

    // Assert: no claim outlived the attempt (its TTL is 15 minutes), so neither waits for one.
    expect(forgotten).toBe(true);
    expect(again?.identity).toBe("b.example.net");
  });

  it("keeps renewal off a host while its worker is between recording the credentials and the end of the attempt", async () => {
    // Arrange: an engine that looks at what renewal would see right after the credentials were recorded.
    const w = world();
    let seenByRenewal: HostExpiry[] = [];
    const engine: Pick<ProvisionEngine, "provision"> = {
      provision: async (work, options) => {
        const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now(), credentialId: "AB:01" };
        await options?.recordCredentials?.(credentials, issuedFor(credentials, credentials.credentialId));
        seenByRenewal = await w.registry.expiries();
        return { kind: "provisioned", identity: work.identity, credentials };
      },
    };

    // Act
    await processor(w, engine).handle(await admitted(w, "a.example.net"), context());

    // Assert: renewal knows the credentials but leaves the host to its worker; once provisioned, renewal applies.
    expect(seenByRenewal.map((host) => [host.identity, renewalApplies(host)])).toEqual([["a.example.net", false]]);
    expect((await w.registry.expiries()).map((host) => [host.identity, renewalApplies(host)])).toEqual([["a.example.net", true]]);
  });

  it("records nothing in the registry, and fails the attempt before configure, when the ledger cannot be written", async () => {
    // Arrange
    const w = world();
    const ledger: Pick<IssuanceLedger, "record"> = {
      record: async () => {
        throw new Error("ProvisionedThroughputExceededException");
      },
    };
    let recordError: unknown;
    const engine: Pick<ProvisionEngine, "provision"> = {
      provision: async (work, options) => {
        const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now() };
        try {
          await options?.recordCredentials?.(credentials, issuedFor(credentials));
        } catch (error) {
          recordError = error;
        }
        return { kind: "failed", identity: work.identity, step: "configure", error: new HelperError("not configured"), retryable: true };
      },
    };

    // Act: a short invocation, so the blip pauses give up at once.
    await processor(w, engine, 4, RETRY, ledger).handle(await admitted(w, "a.example.net"), context(500));

    // Assert
    expect(String(recordError)).toMatch(/ProvisionedThroughputExceededException/);
    expect((await stateOf(w, "a.example.net"))?.credentialsExpireAt).toBeUndefined();
  });

  it("keeps a host paused after its configuration was sent with the credentials recorded for it, so renewal finds it", async () => {
    // Arrange: the engine records the credentials before configuring, then the gate closes (the
    // lease was lost while the configure request may already have reached the node).
    const w = world();
    const credentials = { expiresAt: w.clock.now() + 86_400_000, kind: "certificate" as const, issuedAt: w.clock.now() };
    const engine: Pick<ProvisionEngine, "provision"> = {
      provision: async (work, options) => {
        await options?.recordCredentials?.(credentials, issuedFor(credentials));
        return { kind: "paused", identity: work.identity, step: "restart", error: new PausedError("paused: the lease was lost") };
      },
    };
    const messages = await admitted(w, "a.example.net");

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert: the work is dropped, as any paused work is, but the host is not forgotten.
    expect(result.failedMessageIds).toEqual([]);
    expect(await stateOf(w, "a.example.net")).toMatchObject({ state: "queued", credentialsExpireAt: credentials.expiresAt, credentialsIssuedAt: credentials.issuedAt });
    expect((await w.registry.expiries()).map((host) => host.identity)).toEqual(["a.example.net"]);
  });

  it("provisions a duplicate delivery of provisioned work only once", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    const [message] = await admitted(w, "a.example.net");

    // Act
    await processor(w, engine).handle([message!], context());
    const duplicate = await processor(w, engine).handle([{ ...message!, id: "again" }], context());

    // Assert
    expect(duplicate.failedMessageIds).toEqual([]);
    expect(engine.provisioned).toHaveLength(1);
  });

  it("a standby drops the work (the leader rediscovers the host) without provisioning it", async () => {
    // Arrange
    const site = shared();
    const leader = world({ deploymentId: "west", shared: site });
    const messages = await admitted(leader, "a.example.net");
    const standby = world({ deploymentId: "east", shared: site });
    const engine = new FakeEngine();

    // Act
    const result = await processor(standby, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(engine.provisioned).toEqual([]);
    expect(standby.metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(1);
  });

  it.each([
    ["without a lease item", () => undefined],
    ["whose lease item names this deployment as holder", (w: World) => ({ site: SITE, holder: w.deploymentId, term: 1, expiresAt: w.clock.now() + 30_000 })],
  ])("a leader told it is a standby %s gives every message back, delayed, and drops none", async (_, leaseItem) => {
    // Arrange: the gate's answer after a lease round that completed late, in the next invocation.
    const w = world({ deploymentId: "west" });
    const messages = await admitted(w, "a.example.net", "b.example.net");
    const engine = new FakeEngine();
    const lateRound = { standing: async () => ({ kind: "standby" as const, current: leaseItem(w) }) };

    // Act
    const result = await processor({ ...w, gate: lateRound as unknown as World["gate"] }, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds.sort()).toEqual(messages.map((message) => message.id).sort());
    expect(w.queues.hostWork.delays.map((delay) => delay.receiptHandle).sort()).toEqual(messages.map((message) => message.receiptHandle).sort());
    expect(engine.provisioned).toEqual([]);
    expect(w.metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(0);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("queued");
  });

  it("a deployment its operator paused drops the work as a standby's, not retried until it is dead-lettered", async () => {
    // Arrange: the real gate over the shared lease store, with this deployment's pause switch on.
    const w = world({ deploymentId: "west" });
    const messages = await admitted(w, "a.example.net", "b.example.net");
    const pause = new MemoryPauseStore();
    await pause.write({ site: SITE, deploymentId: "west", paused: true, changedAt: w.clock.now() });
    const gate = createLeaseGate(resolveLeaseSettings({ leaderElection: true, site: SITE, deploymentId: "west" }), {
      store: w.leaseStore,
      pause,
      metrics: w.metrics,
      clock: w.clock,
    });
    const engine = new FakeEngine();

    // Act
    const result = await processor({ ...w, gate }, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.delays).toEqual([]);
    expect(engine.provisioned).toEqual([]);
    expect(w.metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(2);
  });

  it("a deployment that released the lease is a standby and drops the work", async () => {
    // Arrange
    const w = world({ deploymentId: "west" });
    const messages = await admitted(w, "a.example.net");
    const engine = new FakeEngine();
    const released = { standing: async () => ({ kind: "standby" as const, current: { site: SITE, holder: w.deploymentId, term: 1, expiresAt: w.clock.now() + 30_000, released: true } }) };

    // Act
    const result = await processor({ ...w, gate: released as unknown as World["gate"] }, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(1);
  });

  it("drops work admitted under an older term", async () => {
    // Arrange
    const w = world();
    await w.gate.acquireOrKeep();
    const old: HostWork = { identity: "a.example.net", term: 0, admittedAt: w.clock.now(), source: "discovery" };
    const engine = new FakeEngine();

    // Act
    const result = await processor(w, engine).handle([w.queues.hostWork.delivery(encodeHostWork(old))], context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(engine.provisioned).toEqual([]);
  });

  it("hands every message back, delayed, when the lease store cannot be read", async () => {
    // Arrange
    const w = world({ shared: shared({ leaseStore: unreachableLeaseStore() }) });
    const work: HostWork = { identity: "a.example.net", term: 1, admittedAt: w.clock.now(), source: "discovery" };
    const message = w.queues.hostWork.delivery(encodeHostWork(work), 3);
    const engine = new FakeEngine();

    // Act
    const result = await processor(w, engine).handle([message], context());

    // Assert
    expect(result.failedMessageIds).toEqual([message.id]);
    expect(w.queues.hostWork.delays).toEqual([{ receiptHandle: message.receiptHandle, seconds: 30 }]);
    expect(engine.provisioned).toEqual([]);
  });

  it("provisions the host in the same invocation when one lease round mid-provisioning gets no answer from the store", async () => {
    // Arrange: the lease confirmed at admission, then left with less validity (25 s - 10 s) than the
    // 20 s attempt needs, so the gate renews first; the store answers nothing for that one round.
    const leaseStore = blippingLeaseStore();
    const w = world({ shared: shared({ leaseStore }) });
    const messages = await admitted(w, "a.example.net");
    w.clock.advance(10_000);
    leaseStore.failNextCalls(2); // the renewal and the read that would settle it
    const engine = gateReadingEngine(w, 20_000);

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert: provisioned on the second gate read, nothing went back to the queue for the retry delay.
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.delays).toEqual([]);
    expect(engine.tries).toEqual(["a.example.net", "a.example.net"]);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
    expect(leaseStore.failedCalls()).toBe(2);
  });

  it("provisions the host in the same invocation when a slow renewal left less validity than the attempt, instead of dropping it", async () => {
    // Arrange: validity 25 s - 10 s, so the 22 s attempt renews first; that renewal takes 5 s to
    // answer, which leaves 20 s (it counts from before it was sent). The lease stays ours throughout.
    const clock = new VirtualClock();
    const memory = new MemoryLeaseStore();
    let slowRenewals = 0;
    const leaseStore: LeaseStore = {
      ...bindAll(memory),
      extend: async (request) => {
        if (slowRenewals > 0) {
          slowRenewals--;
          clock.advance(5_000);
        }
        return memory.extend(request);
      },
    };
    const w = world({ shared: shared({ clock, leaseStore }) });
    const messages = await admitted(w, "a.example.net");
    w.clock.advance(10_000);
    slowRenewals = 1;
    const engine = gateReadingEngine(w, 22_000);

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert: provisioned on the next gate read (a fresh renewal), not dropped for the next discovery.
    expect(slowRenewals).toBe(0);
    expect(result.failedMessageIds).toEqual([]);
    expect(engine.tries).toEqual(["a.example.net", "a.example.net"]);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
    expect(w.metrics.total(EXTRA_METRIC.staleWorkDiscarded)).toBe(0);
  });

  it("does not drop the host when a renewal's answer was lost and the settling read still showed the old expiry (ours, unconfirmed)", async () => {
    // Arrange: the renewal before the attempt throws before it lands; the read that settles it finds
    // the item naming this deployment with the earlier expiry, so the round cannot confirm the lease.
    const memory = new MemoryLeaseStore();
    let lostRenewals = 0;
    const leaseStore: LeaseStore = {
      ...bindAll(memory),
      extend: async (request) => {
        if (lostRenewals > 0) {
          lostRenewals--;
          throw new Error("TimeoutError: Request did not complete within 1500 ms");
        }
        return memory.extend(request);
      },
    };
    const w = world({ shared: shared({ leaseStore }) });
    const messages = await admitted(w, "a.example.net");
    w.clock.advance(10_000);
    lostRenewals = 1;
    const engine = gateReadingEngine(w, 20_000);

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert: tried again after the pause and provisioned, never dropped as a standby's.
    expect(lostRenewals).toBe(0);
    expect(result.failedMessageIds).toEqual([]);
    expect(engine.tries).toEqual(["a.example.net", "a.example.net"]);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
    expect(w.logger.at("info").map((line) => line.message)).not.toContain("paused mid-provisioning; dropping the work, the leader rediscovers the host");
  });

  it("reads the standing again after a lease round at the start of the batch gets no answer, instead of sending the batch back", async () => {
    // Arrange: a new invocation trusts no earlier round, so its standing read is a store round, and that round fails.
    const leaseStore = blippingLeaseStore();
    const w = world({ shared: shared({ leaseStore }) });
    const messages = await admitted(w, "a.example.net", "b.example.net");
    w.gate.beginInvocation();
    leaseStore.failNextCalls(2);
    const engine = gateReadingEngine(w, 20_000);

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.delays).toEqual([]);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
    expect((await stateOf(w, "b.example.net"))?.state).toBe("provisioned");
    expect(leaseStore.failedCalls()).toBe(2);
  });

  it("still gives the host back, with the reason and the retry delay, when the lease store stays away past the re-reads", async () => {
    // Arrange
    const leaseStore = blippingLeaseStore();
    const w = world({ shared: shared({ leaseStore }) });
    const [message] = await admitted(w, "a.example.net");
    w.clock.advance(10_000);
    leaseStore.failNextCalls(Number.POSITIVE_INFINITY);
    const engine = gateReadingEngine(w, 20_000);
    const started = w.clock.now();

    // Act
    const result = await processor(w, engine).handle([message!], context());

    // Assert: one try and one per pause, then back to the queue; the claim is given back with the
    // lease store as the reason, and the store's own error under it (what tells a timeout from a wrong ARN).
    expect(result.failedMessageIds).toEqual([message!.id]);
    expect(engine.tries).toHaveLength(1 + STORE_BLIP_PAUSES_MS.length);
    expect(w.clock.now() - started).toBe(STORE_BLIP_PAUSES_MS.reduce((sum, pause) => sum + pause, 0));
    expect(w.queues.hostWork.delays).toEqual([{ receiptHandle: message!.receiptHandle, seconds: 10 }]);
    expect(await stateOf(w, "a.example.net")).toMatchObject({ state: "queued", lastError: expect.stringMatching(/lease store.*Request did not complete within 1500 ms/) });
  });

  it("claims the host again in the same invocation when the admission store did not answer the claim", async () => {
    // Arrange: the claim write and the read that would settle it get no answer; the store answers again after that.
    const w = world();
    const messages = await admitted(w, "a.example.net");
    const blipping = blippingAdmissionStore(w.admissionStore);
    const registry = new AdmissionRegistry({ site: SITE, intervalMs: INTERVAL_MS }, { store: blipping.store, metrics: w.metrics, clock: w.clock, logger: w.logger });
    blipping.failing.calls = 2;
    const engine = new FakeEngine();

    // Act
    const result = await processor({ ...w, registry }, engine).handle(messages, context());

    // Assert: provisioned now, not sent back for the retry delay.
    expect(blipping.failing.failed).toBe(2);
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWork.delays).toEqual([]);
    expect(engine.provisioned.map((work) => work.identity)).toEqual(["a.example.net"]);
    expect((await stateOf(w, "a.example.net"))?.state).toBe("provisioned");
  });

  it("does not pause for a lease re-read the invocation has no time left for", async () => {
    // Arrange
    const leaseStore = blippingLeaseStore();
    const w = world({ shared: shared({ leaseStore }) });
    const [message] = await admitted(w, "a.example.net");
    w.clock.advance(10_000);
    leaseStore.failNextCalls(2);
    const engine = gateReadingEngine(w, 20_000);

    // Act: 1.5 s left less the 1 s margin: shorter than the first pause.
    const result = await processor(w, engine).handle([message!], context(1_500));

    // Assert
    expect(result.failedMessageIds).toEqual([message!.id]);
    expect(engine.tries).toHaveLength(1);
    expect(w.clock.sleeps).toEqual([]);
  });

  it("gives work back after a transport failure, however often, without counting it toward parking", async () => {
    // Arrange: the engine's outcome when no configure request verifiably reached the broker.
    const w = world();
    const [message] = await admitted(w, "a.example.net");
    const engine = new FakeEngine();
    const notSent = new RpcRetriesExhaustedError("a.example.net", "choria_provision#configure", 3, new RpcTransportError("a.example.net", "choria_provision#configure", "not sent"));
    engine.outcome = (work) => ({ kind: "failed", identity: work.identity, step: "configure", error: notSent, retryable: true });

    // Act: more deliveries than the failure limit.
    const results = [];
    for (let delivery = 1; delivery <= 4; delivery++) results.push(await processor(w, engine).handle([{ ...message!, receiveCount: delivery }], context()));

    // Assert
    expect(results.map((result) => result.failedMessageIds)).toEqual(Array.from({ length: 4 }, () => [message!.id]));
    expect(w.queues.hostWork.delays).toHaveLength(4);
    expect(w.queues.hostWorkDlq.sent).toEqual([]);
    const entry = await stateOf(w, "a.example.net");
    expect(entry).toMatchObject({ state: "queued", lastError: notSent.message });
    expect(entry?.failures).toBeUndefined();
    expect(w.metrics.total(EXTRA_METRIC.hostsParked)).toBe(0);
  });

  it("sends poison to the host-work DLQ with its reason and acknowledges it", async () => {
    // Arrange
    const w = world();
    const poison = w.queues.hostWork.delivery('{"v":1,"identity":"a b"}');

    // Act
    const result = await processor(w, new FakeEngine()).handle([poison], context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWorkDlq.sent).toEqual([
      {
        body: poison.body,
        attributes: { reason: expect.stringContaining("invalid host-work message"), sourceMessageId: poison.id, sourceQueue: w.queues.hostWork.url },
      },
    ]);
  });

  it("delays a host given back longer with each delivery, up to the cap", async () => {
    // Arrange: five deferred hosts, delivered 1, 2, 5, 11 and 50 times; 30 s per delivery, 300 s at most.
    const w = world();
    const engine = new FakeEngine();
    engine.outcome = (work) => ({ kind: "deferred", identity: work.identity, error: new DeferredError("helper asked to defer") });
    const counts = [1, 2, 5, 11, 50];
    const messages = (await admitted(w, ...counts.map((count) => `n${count}.example.net`))).map((message, index) => ({ ...message, receiveCount: counts[index]! }));
    const slowing = processor(w, engine, 1, { baseDelaySeconds: 30, maxDelaySeconds: 300 });

    // Act
    await slowing.handle(messages, context());

    // Assert
    const delayOf = new Map(w.queues.hostWork.delays.map((delay) => [delay.receiptHandle, delay.seconds]));
    expect(messages.map((message) => delayOf.get(message.receiptHandle))).toEqual([30, 60, 150, 300, 300]);
  });

  it("gives a deferred host back with the reason and delays its next delivery", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    engine.outcome = (work) => ({ kind: "deferred", identity: work.identity, error: new DeferredError("helper asked to defer") });
    const messages = await admitted(w, "a.example.net");

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert
    expect(failedIds(result)).toEqual([messages[0]!.id]);
    expect(w.queues.hostWork.delays).toEqual([{ receiptHandle: messages[0]!.receiptHandle, seconds: 10 }]);
    const { lastErrors } = await w.registry.summary();
    expect(lastErrors).toEqual([expect.objectContaining({ identity: "a.example.net", lastError: "helper asked to defer" })]);
  });

  it("gives the host back when the broker cannot be reached, without provisioning", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    w.broker.prepareError = new Error("connection refused");
    const messages = await admitted(w, "a.example.net");

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([messages[0]!.id]);
    expect(engine.provisioned).toEqual([]);
    expect(w.queues.hostWork.delays).toHaveLength(1);
  });

  it("gives the host back when the gate closed on a lease store blip, but drops it when the lease was lost", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    engine.outcome = (work) =>
      work.identity === "blip.example.net"
        ? { kind: "paused", identity: work.identity, step: "jwt", error: new PausedError("paused", { cause: new LeaseStoreError("timeout") }) }
        : { kind: "paused", identity: work.identity, step: "jwt", error: new PausedError("paused: another deployment holds the lease") };
    const messages = await admitted(w, "blip.example.net", "lost.example.net");

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([messages[0]!.id]);
    expect(await stateOf(w, "lost.example.net")).toBeUndefined();
  });

  it("parks a host after 3 hard failures in a row at one step: its work goes to the DLQ with the last error", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    engine.outcome = hardFailure(new HelperError("cannot start helper"));
    const useCase = processor(w, engine);

    // Act: each failure lets the host be admitted again, until the third parks it.
    const results = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      results.push(await useCase.handle(await admitted(w, "a.example.net"), context()));
      w.clock.advance(1_000);
    }
    const afterParking = await w.admission.admitAndEnqueue(["a.example.net"], "discovery", 1);

    // Assert
    expect(results.map((result) => result.failedMessageIds)).toEqual([[], [], []]);
    expect(engine.provisioned).toHaveLength(3);
    expect(w.queues.hostWorkDlq.sent).toHaveLength(1);
    expect(w.queues.hostWorkDlq.sent[0]?.attributes).toMatchObject({
      reason: "helper: cannot start helper",
      identity: "a.example.net",
      step: "helper",
      failures: "3",
      term: "1",
    });
    expect(decodeHostWork(w.queues.hostWorkDlq.sent[0]!.body).identity).toBe("a.example.net");
    expect((await stateOf(w, "a.example.net"))?.state).toBe("parked");
    expect(w.metrics.total(EXTRA_METRIC.hostsParked)).toBe(1);
    expect(afterParking.queued).toEqual([]);
  });

  it("parks at once a step no lease validity can cover", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    engine.outcome = hardFailure(new AttemptExceedsLeaseError("helper_timeout exceeds the lease"));

    // Act
    const result = await processor(w, engine).handle(await admitted(w, "a.example.net"), context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(w.queues.hostWorkDlq.sent[0]?.attributes).toMatchObject({ failures: "1", step: "helper" });
    expect((await stateOf(w, "a.example.net"))?.state).toBe("parked");
  });

  it("skips work that waited longer than 2 x interval", async () => {
    // Arrange
    const w = world();
    const engine = new FakeEngine();
    const messages = await admitted(w, "a.example.net");
    w.clock.advance(2 * INTERVAL_MS + 1);
    await w.gate.acquireOrKeep();

    // Act
    const result = await processor(w, engine).handle(messages, context());

    // Assert
    expect(result.failedMessageIds).toEqual([]);
    expect(engine.provisioned).toEqual([]);
  });

  it("hands the engine the remaining time less the margin", async () => {
    // Arrange
    const w = world();
    let remaining: number | undefined;
    const engine = new FakeEngine();
    const useCase = new HostWorkProcessor({
      settings: { deploymentId: w.deploymentId, workers: 1, retry: RETRY, failureLimit: 3, deadlineMarginMs: 1_000, site: SITE, ledgerRetentionMs: LEDGER_RETENTION_MS },
      gate: w.gate,
      registry: w.registry,
      ledger: new MemoryIssuanceLedger(),
      engine: {
        provision: async (work, options) => {
          remaining = options?.remainingMs?.();
          return engine.provision(work);
        },
      },
      broker: w.broker,
      hostWork: w.queues.hostWork,
      hostWorkDlq: w.queues.hostWorkDlq,
      logger: w.logger,
      metrics: w.metrics,
    });

    // Act
    await useCase.handle(await admitted(w, "a.example.net"), context(20_000));

    // Assert
    expect(remaining).toBe(19_000);
  });
});
