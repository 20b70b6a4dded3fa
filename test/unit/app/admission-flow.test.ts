import { describe, expect, it } from "vitest";
import type { AdmissionStore } from "../../../lib/ports/admission-store";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { admissionFlowOver, admissionStoreFailingFor, answerLostOnce, INTERVAL_MS, RESEND_UNKNOWN, SITE, world, type World } from "./support";

const refusedByQueue = { accepted: false as const, permanent: false, reason: "throttled" };

describe("the admission flow: admitAndEnqueue", () => {
  it("admits each host under the term and queues its term-stamped work", async () => {
    // Arrange
    const w = world();

    // Act
    const result = await w.admission.admitAndEnqueue(["a.example.net", "b.example.net"], "discovery", 7);

    // Assert
    expect(result.queued.map((work) => work.identity)).toEqual(["a.example.net", "b.example.net"]);
    expect(result.notQueued).toEqual([]);
    expect(result.failed).toEqual([]);
    expect(w.queues.hostWork.bodies().map(decodeHostWork)).toEqual([
      { identity: "a.example.net", term: 7, admittedAt: w.clock.now(), source: "discovery" },
      { identity: "b.example.net", term: 7, admittedAt: w.clock.now(), source: "discovery" },
    ]);
  });

  it("does not admit a host again within the interval, and does once it has passed", async () => {
    // Arrange
    const w = world();
    await w.admission.admitAndEnqueue(["a.example.net"], "discovery", 1);

    // Act
    const again = await w.admission.admitAndEnqueue(["a.example.net"], "event", 1);
    w.clock.advance(INTERVAL_MS + 1);
    const later = await w.admission.admitAndEnqueue(["a.example.net"], "event", 1);

    // Assert
    expect(again.queued).toEqual([]);
    expect(later.queued.map((work) => work.source)).toEqual(["event"]);
    expect(w.queues.hostWork.sent).toHaveLength(2);
  });

  it("withdraws an admission whose work the queue refused, so the host is admitted again at once", async () => {
    // Arrange
    const w = world();
    w.queues.hostWork.refuse = () => refusedByQueue;
    const refused = await w.admission.admitAndEnqueue(["a.example.net"], "discovery", 1);
    w.queues.hostWork.refuse = () => undefined;

    // Act
    const retried = await w.admission.admitAndEnqueue(["a.example.net"], "discovery", 1);

    // Assert
    expect(refused.notQueued.map((work) => work.identity)).toEqual(["a.example.net"]);
    expect(refused.queued).toEqual([]);
    expect(w.logger.at("error").map((line) => line.message)).toContain("could not queue host work; forgetting the host so it is admitted again");
    expect(retried.queued.map((work) => work.identity)).toEqual(["a.example.net"]);
  });

  it("reports a host the registry could not admit, and still queues the others", async () => {
    // Arrange
    const w = world();
    const store = admissionStoreFailingFor(w.admissionStore, "bad.example.net");
    const flow = admissionFlowOver(w, store);

    // Act
    const result = await flow.admitAndEnqueue(["bad.example.net", "good.example.net"], "discovery", 1);

    // Assert
    expect(result.failed.map((failure) => failure.identity)).toEqual(["bad.example.net"]);
    expect(result.queued.map((work) => work.identity)).toEqual(["good.example.net"]);
    const logged = w.logger.at("error").find((line) => line.message === "could not admit host");
    expect(logged?.attributes).toMatchObject({ identity: "bad.example.net", term: 1 });
  });
});

describe("the admission flow: an admission whose outcome stayed unknown", () => {
  const flowOver = (w: World, store: AdmissionStore) => admissionFlowOver(w, store, { resendUnknown: RESEND_UNKNOWN });

  it("is sent again while the caller has the time, and the work of the admission that landed late is queued now", async () => {
    // Arrange
    const w = world();
    const flow = flowOver(w, answerLostOnce(w.admissionStore));
    const startedAt = w.clock.now();

    // Act
    const result = await flow.admitAndEnqueue(["a.example.net", "b.example.net"], "discovery", 1, () => 20_000);

    // Assert: queued with the admission that is in the table, so the worker's claim matches it.
    expect(result.failed).toEqual([]);
    expect(result.queued.map((work) => work.identity)).toEqual(["a.example.net", "b.example.net"]);
    const queued = w.queues.hostWork.bodies().map(decodeHostWork);
    for (const work of queued) {
      const entry = await w.admissionStore.read({ site: SITE, identity: work.identity });
      expect(entry).toMatchObject({ state: "queued", term: 1, admittedAt: work.admittedAt });
      expect(work.admittedAt).toBe(startedAt);
    }
    const claim = await w.registry.begin(queued[0]!, 1);
    expect(claim.status).toBe("claimed");
  });

  it("fails at once, as before, when the caller's time does not cover another whole admission", async () => {
    // Arrange
    const w = world();
    const flow = flowOver(w, answerLostOnce(w.admissionStore));

    // Act: less than the pause plus one admission against a stalled store.
    const result = await flow.admitAndEnqueue(["a.example.net"], "discovery", 1, () => RESEND_UNKNOWN.pauseMs + RESEND_UNKNOWN.withinMs - 1);

    // Assert: reported as failed (never dropped as admitted), nothing queued, no pause taken.
    expect(result.failed.map((failure) => failure.identity)).toEqual(["a.example.net"]);
    expect(result.queued).toEqual([]);
    expect(w.queues.hostWork.sent).toEqual([]);
    expect(w.clock.sleeps).toEqual([]);
  });

  it("is reported as failed when the store still does not answer the second time", async () => {
    // Arrange
    const w = world();
    const flow = flowOver(w, admissionStoreFailingFor(w.admissionStore, "a.example.net"));

    // Act
    const result = await flow.admitAndEnqueue(["a.example.net"], "discovery", 1, () => 20_000);

    // Assert
    expect(result.failed.map((failure) => failure.identity)).toEqual(["a.example.net"]);
    expect(w.queues.hostWork.sent).toEqual([]);
    expect(w.clock.sleeps).toEqual([RESEND_UNKNOWN.pauseMs]);
  });
});

describe("the admission flow: readmit (the operator's override)", () => {
  it("admits a recently admitted host again at once under the given term, once per distinct identity", async () => {
    // Arrange
    const w = world();
    await w.admission.admitAndEnqueue(["a.example.net"], "discovery", 1);

    // Act
    const outcomes = await w.admission.readmit(["a.example.net", "a.example.net"], 2);

    // Assert
    expect(outcomes).toEqual([{ identity: "a.example.net", queued: true }]);
    expect(w.queues.hostWork.bodies().map(decodeHostWork).at(-1)).toMatchObject({ identity: "a.example.net", term: 2, source: "operator" });
  });

  it("refuses invalid names, hosts being provisioned and work the queue refused, each with its reason", async () => {
    // Arrange
    const w = world();
    const [work] = (await w.admission.admitAndEnqueue(["busy.example.net"], "discovery", 1)).queued;
    const begun = await w.registry.begin(work!, 1);
    expect(begun.status).toBe("claimed");
    w.queues.hostWork.refuse = (message) => (decodeHostWork(message.body).identity === "full.example.net" ? refusedByQueue : undefined);

    // Act
    const outcomes = await w.admission.readmit(["not valid", "busy.example.net", "full.example.net", "ok.example.net"], 1);

    // Assert
    expect(outcomes).toEqual([
      { identity: "not valid", queued: false, reason: expect.stringContaining("whitespace") },
      { identity: "busy.example.net", queued: false, reason: "the host is being provisioned right now" },
      { identity: "full.example.net", queued: false, reason: "the host-work queue refused the message" },
      { identity: "ok.example.net", queued: true },
    ]);
  });
});
