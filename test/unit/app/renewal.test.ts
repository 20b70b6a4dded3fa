import { describe, expect, it } from "vitest";
import { dueHosts, emptyRenewalState, renewableAt, renewalReport, renewRunsMissing, retryMark } from "../../../lib/app/renewal-state";
import { RpcNotSentError, PausedError } from "../../../lib/errors";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { HOUR_MS, MINUTE_MS, renewalWorld, SITE, TERM, TOKEN } from "../../support/renewal";
import { timeout } from "../../support/fakes";

const DAY_MS = 24 * HOUR_MS;

describe("renewal of 10,000 hosts whose credentials expire within one hour", () => {
  it("renews every host once, inside its window and before expiry, at no more than the rate and the in-flight bound", { timeout: 300_000 }, async () => {
    // Arrange: the window (2 h) opens at once for the first hosts; 100 a minute renews them all in 100 minutes.
    const w = renewalWorld({ before: { ms: 2 * HOUR_MS }, ratePerMinute: 100, maxInFlight: 400 });
    const start = w.clock.now();
    const clusterStart = start + 2 * HOUR_MS;
    const expiry = new Map<string, number>();
    for (let index = 0; index < 10_000; index++) {
      const identity = `node-${String(index).padStart(5, "0")}.example.net`;
      const expiresAt = clusterStart + Math.floor((index / 10_000) * HOUR_MS);
      expiry.set(identity, expiresAt);
      await w.provision(identity, expiresAt, 30 * DAY_MS);
    }

    // Act: the schedule runs once a minute until every node is back or the cluster has expired.
    const allBack = () => [...w.nodes.values()].every((node) => node.backAt.length > 0);
    while (w.clock.now() < clusterStart + HOUR_MS && !allBack()) {
      await w.run();
      await w.advance(MINUTE_MS);
    }
    // One more run settles the last hosts back.
    await w.run();

    // Assert, from what the nodes recorded.
    const sends: number[] = [];
    for (const [identity, node] of w.nodes) {
      expect(node.reprovisionedAt, identity).toHaveLength(1);
      const at = node.reprovisionedAt[0] as number;
      const expiresAt = expiry.get(identity) as number;
      expect(at, identity).toBeGreaterThanOrEqual(expiresAt - 2 * HOUR_MS);
      expect(node.backAt[0], identity).toBeLessThan(expiresAt);
      sends.push(at);
    }
    expect(sends).toHaveLength(10_000);
    const perMinute = new Map<number, number>();
    for (const at of sends) {
      const minute = Math.floor((at - start) / MINUTE_MS);
      perMinute.set(minute, (perMinute.get(minute) ?? 0) + 1);
    }
    expect(Math.max(...perMinute.values())).toBe(100);
    // Hosts out of service at once, swept over every node's going out and coming back.
    const changes = [...w.nodes.values()].flatMap((node) => [
      { at: node.reprovisionedAt[0] as number, change: 1 },
      { at: node.backAt[0] as number, change: -1 },
    ]);
    changes.sort((a, b) => a.at - b.at || a.change - b.change);
    let out = 0;
    let mostOut = 0;
    for (const { change } of changes) mostOut = Math.max(mostOut, (out += change));
    expect(mostOut).toBeGreaterThan(0);
    expect(mostOut).toBeLessThanOrEqual(400);
    expect(w.metrics.total(EXTRA_METRIC.renewalsCompleted)).toBe(10_000);
    expect(w.metrics.total(EXTRA_METRIC.renewalFailures)).toBe(0);
  });

  it("spreads hosts provisioned together across the window instead of renewing them all when it opens", async () => {
    // Arrange: 200 hosts with one expiry, a rate that could renew them all in the first minute.
    const w = renewalWorld({ before: { ms: 4 * HOUR_MS }, ratePerMinute: 1_000, maxInFlight: 1_000 });
    const expiresAt = w.clock.now() + 4 * HOUR_MS;
    for (let index = 0; index < 200; index++) await w.provision(`batch-${index}`, expiresAt, 30 * DAY_MS);

    // Act
    while (w.clock.now() < expiresAt) {
      await w.run();
      await w.advance(MINUTE_MS);
    }

    // Assert: the sends cover most of the first half of the window, each host once.
    const sends = [...w.nodes.values()].map((node) => {
      expect(node.reprovisionedAt).toHaveLength(1);
      return node.reprovisionedAt[0] as number;
    });
    expect(Math.max(...sends) - Math.min(...sends)).toBeGreaterThan(1.5 * HOUR_MS);
    expect(Math.max(...sends)).toBeLessThanOrEqual(expiresAt - 2 * HOUR_MS);
  });
});

describe("renewal sends", () => {
  it("sends reprovision with the provisioning token, stamped by the gate, under the leading term", async () => {
    // Arrange
    const w = renewalWorld();
    await w.provision("node1", w.clock.now() + HOUR_MS, 2 * HOUR_MS);

    // Act
    const result = await w.run();

    // Assert
    expect(result).toMatchObject({ status: "ran", term: TERM, sent: ["node1"], inFlight: 1 });
    const call = w.rpc.callsTo("choria_provision#reprovision")[0];
    expect(call).toMatchObject({ identity: "node1", agent: "choria_provision", action: "reprovision", data: { token: TOKEN } });
    expect(w.gate.checks.every((check) => check.term === TERM)).toBe(true);
    expect((await w.store.read(SITE)).state.inFlight.node1).toMatchObject({ term: TERM });
  });

  it("does nothing on a standby", async () => {
    // Arrange
    const w = renewalWorld();
    await w.provision("node1", w.clock.now() + HOUR_MS);
    w.gate.close();

    // Act
    const result = await w.run();

    // Assert
    expect(result).toEqual({ status: "standby" });
    expect(w.nodes.get("node1")?.reprovisionedAt).toEqual([]);
  });

  it("sends nothing more once the gate closes mid-run, and frees the hosts it had reserved", async () => {
    // Arrange
    const w = renewalWorld({ ratePerMinute: 50 });
    for (let index = 0; index < 50; index++) await w.provision(`node${index}`, w.clock.now() + HOUR_MS);
    let opened = 0;
    w.gate.closeWhen = () => ++opened > 10;
    w.gate.failure = new PausedError("the lease term 4 is no longer current");

    // Act
    const result = await w.run();

    // Assert: node side, exactly the requests the gate let through were run.
    const ran = [...w.nodes.values()].filter((node) => node.reprovisionedAt.length > 0).length;
    // The first check of each host is rpcWithRetries' loop guard, the second the attempt's own.
    expect(ran).toBeLessThanOrEqual(5);
    expect(w.rpc.callsTo("choria_provision#reprovision")).toHaveLength(ran);
    expect(result).toMatchObject({ status: "ran", inFlight: ran });
    expect(Object.keys((await w.store.read(SITE)).state.inFlight)).toHaveLength(ran);
  });

  it("does not count a request that never left (its send-by instant passed) as a failure, and sends it again later", async () => {
    // Arrange
    const w = renewalWorld();
    await w.provision("node1", w.clock.now() + HOUR_MS, DAY_MS);
    w.rpc.queue("choria_provision#reprovision", new RpcNotSentError("node1", "choria_provision#reprovision", "not sent: the send-by instant passed before the attempt started"));

    // Act
    const first = await w.run();
    const sendsCounted = (await w.store.read(SITE)).state.sends;
    await w.advance(MINUTE_MS);
    const second = await w.run();

    // Assert
    expect(first).toMatchObject({ sent: [], refused: [], inFlight: 0 });
    expect((await w.registry.expiries())[0]?.renewal).toBeUndefined();
    expect(sendsCounted).toEqual([]);
    expect(second).toMatchObject({ sent: ["node1"] });
    expect(w.metrics.total(EXTRA_METRIC.renewalFailures)).toBe(0);
  });

  it("marks a node that refuses reprovision with the reason, renews the others, and tries it again with backoff", async () => {
    // Arrange
    const w = renewalWorld();
    await w.provision("good1", w.clock.now() + HOUR_MS, DAY_MS);
    await w.provision("bad1", w.clock.now() + HOUR_MS, DAY_MS);
    await w.provision("good2", w.clock.now() + HOUR_MS, DAY_MS);
    w.refusing.set("bad1", "You are not authorized to call this agent or action");

    // Act: minute by minute, the refusal lifted after 5 minutes.
    const first = await w.run();
    const marked = (await w.registry.expiries()).find((host) => host.identity === "bad1")?.renewal;
    for (let minute = 1; minute <= 10; minute++) {
      await w.advance(MINUTE_MS);
      if (minute === 5) w.refusing.delete("bad1");
      await w.run();
    }
    await w.advance(5 * MINUTE_MS);
    await w.run();

    // Assert: tried again at 30 s, 1 min, 2 min after each failure (whole minutes here), then renewed.
    expect(first).toMatchObject({ sent: ["good1", "good2"], refused: [{ identity: "bad1", reason: expect.stringContaining("You are not authorized") }] });
    expect(marked).toMatchObject({ attempts: 1, reason: expect.stringContaining("You are not authorized"), retryAt: w.clock.now() - 15 * MINUTE_MS + 30_000 });
    const tries = w.rpc.callsTo("choria_provision#reprovision").filter((call) => call.identity === "bad1");
    expect(tries.length).toBeGreaterThanOrEqual(3);
    expect(tries.length).toBeLessThanOrEqual(5);
    expect(w.nodes.get("bad1")?.backAt).toHaveLength(1);
    expect((await w.registry.expiries()).find((host) => host.identity === "bad1")?.renewal).toBeUndefined();
  });

  it("counts refused and unanswered requests toward the rate, and keeps an unanswered host in flight", async () => {
    // Arrange: rate 4; two nodes refuse, one never answers.
    const w = renewalWorld({ ratePerMinute: 4 });
    for (let index = 0; index < 8; index++) await w.provision(`node${index}`, w.clock.now() + HOUR_MS + index, DAY_MS);
    w.refusing.set("node1", "You are not authorized to call this agent or action");
    w.refusing.set("node2", "You are not authorized to call this agent or action");
    // node0, due first, gets no answer.
    w.rpc.queue("choria_provision#reprovision", timeout("node0", "choria_provision#reprovision"));

    // Act: two runs within the same minute.
    const first = await w.run();
    await w.advance(20_000);
    const second = await w.run();

    // Assert: four requests left in the first run, none in the second: the rate counts what left.
    expect(w.rpc.callsTo("choria_provision#reprovision")).toHaveLength(4);
    expect(first).toMatchObject({ unanswered: ["node0"], sent: ["node3"], refused: [{ identity: "node1" }, { identity: "node2" }] });
    expect(second).toMatchObject({ sent: [], refused: [], unanswered: [] });
    expect((await w.store.read(SITE)).state.sends).toHaveLength(4);
    expect(first.status === "ran" && first.inFlight).toBe(2);
  });

  it("tries a host that accepted reprovision but was not provisioned again within the bound again, until it is", async () => {
    // Arrange
    const w = renewalWorld({ timeoutMs: 10 * MINUTE_MS });
    await w.provision("lost1", w.clock.now() + HOUR_MS);
    w.lost.add("lost1");

    // Act
    await w.run();
    await w.advance(11 * MINUTE_MS);
    const timedOut = await w.run();
    const mark = (await w.registry.expiries())[0]?.renewal;
    w.lost.delete("lost1");
    await w.advance(MINUTE_MS);
    const retried = await w.run();
    await w.advance(5 * MINUTE_MS);
    await w.run();

    // Assert
    expect(timedOut).toMatchObject({ timedOut: ["lost1"], sent: [], inFlight: 0 });
    expect(mark).toMatchObject({ attempts: 1, reason: "not provisioned again within 600s of its reprovision request" });
    expect(retried).toMatchObject({ sent: ["lost1"] });
    expect(w.nodes.get("lost1")?.backAt).toHaveLength(1);
    expect(w.metrics.total(EXTRA_METRIC.renewalFailures)).toBe(1);
    expect(w.logger.at("error").map((record) => record.message)).toContain(
      "renewal of lost1 failed: not provisioned again within 600s of its reprovision request; tried again later",
    );
  });

  it("counts one failing host once toward the pause however often it is retried", async () => {
    // Arrange: one node refuses for an hour; the pause takes more than 2 failed hosts.
    const w = renewalWorld({ failureThreshold: 2, failureWindow: 10 });
    await w.provision("stubborn", w.clock.now() + 2 * HOUR_MS, DAY_MS);
    w.refusing.set("stubborn", "You are not authorized to call this agent or action");

    // Act
    let last: Awaited<ReturnType<typeof w.run>> | undefined;
    for (let minute = 0; minute < 60; minute++) {
      last = await w.run();
      await w.advance(MINUTE_MS);
    }

    // Assert
    expect(w.rpc.callsTo("choria_provision#reprovision").length).toBeGreaterThan(3);
    expect(last).toMatchObject({ status: "ran" });
  });

  it("renews a configured host the registry admitted again and failed to provision: its credentials are what counts", async () => {
    // Arrange: a stale admission under a new term, whose provisioning failed (the node is configured, not in provisioning mode).
    const w = renewalWorld();
    await w.provision("node1", w.clock.now() + HOUR_MS, DAY_MS);
    w.clock.advance(2 * MINUTE_MS);
    const begun = await w.registry.begin((await w.registry.admit("node1", "event", TERM + 1))!, TERM + 1);
    if (begun.status !== "claimed") throw new Error(begun.status);
    await w.registry.recordFailure(begun.claim, { step: "jwt", reason: "no reply", failures: 1, park: false });

    // Act
    const result = await w.run();

    // Assert
    expect((await w.registry.expiries())[0]).toMatchObject({ state: "failed" });
    expect(result).toMatchObject({ sent: ["node1"] });
  });

  it("gauges the hosts at risk and the hosts expired, for the alarms", async () => {
    // Arrange: a 4 h window; one host in its last quarter (40 min left), one expired, one far off.
    const w = renewalWorld({ before: { ms: 4 * HOUR_MS }, enabled: false });
    await w.provision("risky", w.clock.now() + 40 * MINUTE_MS, DAY_MS);
    await w.provision("gone", w.clock.now() + MINUTE_MS, DAY_MS);
    await w.provision("fine", w.clock.now() + 10 * HOUR_MS, DAY_MS);
    await w.advance(2 * MINUTE_MS);

    // Act
    await w.run();

    // Assert
    expect(w.metrics.of(EXTRA_METRIC.renewalHostsAtRisk).at(-1)?.value).toBe(1);
    expect(w.metrics.of(EXTRA_METRIC.credentialsExpired).at(-1)?.value).toBe(1);
  });

  it("pauses itself when more than the threshold of the last renewals failed, says why, and sends nothing more", async () => {
    // Arrange
    const w = renewalWorld({ failureThreshold: 2, failureWindow: 10, ratePerMinute: 3 });
    for (let index = 0; index < 6; index++) {
      await w.provision(`bad${index}`, w.clock.now() + HOUR_MS + index);
      w.refusing.set(`bad${index}`, "Incorrect provision token supplied");
    }
    await w.provision("good", w.clock.now() + 2 * HOUR_MS, 3 * HOUR_MS);

    // Act
    const first = await w.run();
    await w.advance(MINUTE_MS);
    const second = await w.run();

    // Assert
    expect(first).toMatchObject({ status: "paused", pausedBecause: expect.stringContaining("3 of the last 3 renewed hosts failed (more than 2 of 10)") });
    expect(first.status === "paused" && first.pausedBecause).toContain("Incorrect provision token supplied");
    expect(second).toMatchObject({ status: "paused", sent: [], refused: [] });
    expect(w.rpc.callsTo("choria_provision#reprovision")).toHaveLength(3);
    expect(w.metrics.of(EXTRA_METRIC.renewalPaused).at(-1)?.value).toBe(1);
  });
});

describe("renewal's mark of its runs", () => {
  it("a leader's run marks the site's state with when it ran and its term, so an operator's request knows a run will take it; a standby's run does not", async () => {
    // Arrange
    const w = renewalWorld({ enabled: false });
    const site = renewalWorld({ enabled: false });
    site.gate.closeWhen = () => true;

    // Act
    await w.run();
    const asStandby = await site.renewal.run({ remainingMs: () => MINUTE_MS });

    // Assert
    const { state } = await w.store.read(SITE);
    expect(state.lastRun).toEqual({ at: w.clock.now(), term: TERM });
    expect(renewRunsMissing(state, SITE, w.clock.now() + 5 * MINUTE_MS)).toBeUndefined();
    expect(renewRunsMissing(state, SITE, w.clock.now() + 6 * MINUTE_MS)).toMatch(/^the last renew run on site "\S+" was 6 minutes ago \(term \d+\)/);
    expect(asStandby).toEqual({ status: "standby" });
    expect((await site.store.read(SITE)).version).toBe(0);
  });
});

describe("renewal's due rules", () => {
  const host = (identity: string, expiresAt: number, issuedAt = 0) => ({ identity, state: "provisioned" as const, credentials: { expiresAt, kind: "certificate" as const, issuedAt } });

  it("opens the window `before` ahead of expiry and places each host in its first half by name", () => {
    // The place is the FNV-1a hash of the name as a fraction of 2^32: "a" hashes to 0xe40c292c (the published test vector).
    const spreadOfA = 0xe40c292c / 2 ** 32;
    const at = renewableAt(host("a", 10 * HOUR_MS), { ms: 4 * HOUR_MS });
    expect(at).toBe(6 * HOUR_MS + spreadOfA * 2 * HOUR_MS);
    expect(renewableAt(host("a", 10 * HOUR_MS, 2 * HOUR_MS), { fraction: 0.5 })).toBe(6 * HOUR_MS + spreadOfA * 2 * HOUR_MS);
  });

  it("lists due hosts soonest expiry first, leaving out expired, in-flight and not-yet-retried hosts", () => {
    const state = emptyRenewalState();
    state.inFlight.busy = { sentAt: 0, term: 1, expiresAt: 3 * HOUR_MS };
    const waiting = { ...host("waiting", 2 * HOUR_MS), renewal: { attempts: 1, retryAt: HOUR_MS + 1, reason: "refused", at: HOUR_MS - 30_000 } };
    const retried = { ...host("retried", 2 * HOUR_MS + 1), renewal: { attempts: 3, retryAt: HOUR_MS, reason: "refused", at: HOUR_MS - 120_000 } };
    const hosts = [host("late", 3 * HOUR_MS), host("soon", 2 * HOUR_MS), host("gone", HOUR_MS / 2), host("busy", 3 * HOUR_MS), waiting, retried];

    const due = dueHosts(hosts, state, { ms: 10 * HOUR_MS }, HOUR_MS);

    expect(due.map((entry) => entry.identity)).toEqual(["soon", "retried", "late"]);
  });

  it("backs off a failed host, doubling from 30 s to an hour, never past a quarter of the time its credentials have left", () => {
    const now = 10 * DAY_MS;
    const far = host("far", now + 30 * DAY_MS);
    const mark = (attempts: number, of = far) => retryMark({ ...of, ...(attempts > 0 ? { renewal: { attempts, retryAt: 0, reason: "", at: 0 } } : {}) }, "no answer", now);

    expect([0, 1, 2, 7, 12].map((attempts) => mark(attempts).retryAt - now)).toEqual([30_000, 60_000, 120_000, 3_600_000, 3_600_000]);
    expect(mark(6, host("near", now + 8 * MINUTE_MS)).retryAt - now).toBe(2 * MINUTE_MS);
    expect(mark(2)).toMatchObject({ attempts: 3, reason: "no answer", at: now });
  });

  it("reports the expiry distribution cumulatively and the next hosts due", () => {
    const now = 100 * DAY_MS;
    const hosts = [host("x", now - 1), host("h", now + HOUR_MS), host("w", now + 3 * DAY_MS), host("m", now + 20 * DAY_MS), host("y", now + 90 * DAY_MS)];
    const report = renewalReport(hosts, emptyRenewalState(), SITE, now).expiry;
    expect(report).toMatchObject({ known: 5, expired: 1, within24h: 1, within7d: 2, within30d: 3 });
    expect(report.next.map((entry) => entry.identity)).toEqual(["h", "w", "m", "y"]);
    expect(report.expiredHosts).toEqual([{ identity: "x", expiredAt: now - 1, kind: "certificate", action: expect.stringContaining("re-enrol the node") }]);
  });
});
