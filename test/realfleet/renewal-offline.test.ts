/**
 * Renewal of real go-choria v0.30.2 servers that are not there when renewal comes for them
 * (docs/renewal.md, "A failed host is tried again until its credentials expire" and "Expired
 * hosts"). Short-lived credentials as in renewal.test.ts: v1 (`pki`, certificates the helper signs
 * valid VALIDITY_S) and v2 (`ed25519`, server JWTs valid VALIDITY_S), side by side, each with its
 * own local stack and its own renewal bounds.
 *
 * - v1: one node's server is killed (SIGKILL, a crash) just before renewal sends to it and started
 *   again once renewal saw no answer; one node's action policy refuses reprovision; one is good.
 * - v2: one node's server is frozen (SIGSTOP) just before renewal sends to it and continued once the
 *   request it got is older than its TTL; one node is stopped and kept stopped past its expiry, then
 *   started again; one is good.
 *
 * What decides is what the nodes hold and logged (their certificate or server JWT, written
 * configuration, the lines go-choria logs for each request it handles, denies or drops as too old,
 * each restart it is asked for, its boot), the admin's `choria ping`, and every reprovision request
 * the target broker carried, seen by an observer subscribed there (a killed node logs nothing).
 * `status` and the at-risk / expired gauges are sampled every couple of seconds as an operator
 * would see them.
 *
 * Timing follows the protocol's bounds. The window opens BEFORE_S ahead of expiry, 60 s after
 * provisioning (so a renewed host is past admission's one-`interval` wait), and each host starts at
 * its place in the first half of the window (`renewableAt`, by a hash of its name): the nodes that
 * fail are named so that place is within 6 s of the window opening, the good ones later. A host that
 * gave no answer is held in flight until `renew.timeout` (TIMEOUT_S, shorter than two discovery
 * intervals plus the request's 22 s) and tried again 30 s later at most (a quarter of the time its
 * credentials have left), so its second request leaves about 2 minutes after the first, with a
 * minute of its credentials left for it to come back. Every wait is bounded by the credentials'
 * expiry or the provisioning bounds, never by the machine's speed.
 */
import { readFile } from "node:fs/promises";
import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { HostExpiry } from "../../lib/admission/site-listing";
import { unansweredHoldFor } from "../../lib/app/renewal";
import { renewableAt, type RenewalReport } from "../../lib/app/renewal-state";
import { decodeRequest } from "../support/choria-node/protocol";
import { EXTRA_METRIC } from "../../lib/ports/metric-names";
import type { RealFleet, RealNode } from "../../dev/local/real-fleet";
import { brokerConnectOptions, provisionedFleet, verifyServerJwt, waitForArrivals, waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { waitUntilAsync } from "../support/wait";
import { certificateFile, run, serverJwtOf } from "./node-credentials";
import { renewSection, v1RenewalFleet } from "./renewal-settings";

// Names chosen for their place in the window (spreadOf): the failing nodes go first, the good ones later.
const GOOD_V1 = "good-3.v1.offline.example.net";
const KILLED = "killed-17.v1.offline.example.net";
const REFUSING = "deny-110.v1.offline.example.net";
const V1_NODES = [GOOD_V1, KILLED, REFUSING];
const GOOD_V2 = "good-1.v2.offline.example.net";
const FROZEN = "frozen-25.v2.offline.example.net";
const EXPIRING = "expiring-14.v2.offline.example.net";
const V2_NODES = [GOOD_V2, FROZEN, EXPIRING];

const VALIDITY_S = 270;
const BEFORE_S = 210;
const RATE = 3;
const MAX_IN_FLIGHT = 2;
const TIMEOUT_S = 75;
/** `interval`'s default and minimum: admission takes a host again only this long after its last admission. */
const INTERVAL_MS = 60_000;
/** A host in the last quarter of its window is at risk (docs/renewal.md). */
const AT_RISK_MS = (BEFORE_S * 1000) / 4;
/** The fault lands this long before the host's place in the window (a graceful stop takes up to 10 s). */
const FAULT_LEAD_MS = 15_000;
/**
 * A node in provisioning mode is found by its startup event or the next discovery and admitted,
 * provisioned and restarted (splay up to 12 s): within two discoveries plus the request's wait,
 * and a renew.timeout for the sequence itself.
 */
const PROVISION_BOUND_MS = unansweredHoldFor(INTERVAL_MS) + TIMEOUT_S * 1000;
/** logrus logs whole seconds, and a node logs a request a moment after it left: two sends a minute apart may look 58-59 s apart. */
const LOG_SLACK_MS = 2_000;
const STATUS_EVERY_MS = 2_000;
// A v1 node takes clients whose certificate name matches `\.mcollective$` (go-choria's default certname_whitelist).
const NO_ANSWER = "reprovision got no answer; the host stays in flight until it comes back or shows it did not act";

// ---------------------------------------------------------------------------------------------
// What a node holds and logged

/** The credentials a node holds: its certificate's serial or its server JWT, and when they expire. */
interface Credential {
  fingerprint: string;
  expiresAt: number;
}

async function certificateCredential(provisioned: ProvisionedFleet, identity: string): Promise<Credential | undefined> {
  const out = await run("openssl", ["x509", "-noout", "-serial", "-enddate", "-in", certificateFile(provisioned, identity)]).catch(() => undefined);
  if (!out) return undefined;
  return { fingerprint: /serial=(\S+)/.exec(out.stdout)?.[1] ?? "", expiresAt: Date.parse(/notAfter=(.+)/.exec(out.stdout)?.[1] ?? "") };
}

/** The node's server JWT verified against the site signer (undefined while it has none: go-choria removes an expired one at boot). */
async function serverJwtCredential(provisioned: ProvisionedFleet, identity: string): Promise<Credential | undefined> {
  const token = await serverJwtOf(provisioned, identity).catch(() => "");
  if (token.trim() === "") return undefined;
  const claims = verifyServerJwt(token, provisioned.serverJwtSigner);
  if (claims.identity !== identity) throw new Error(`${identity} holds a server JWT for ${String(claims.identity)}`);
  return { fingerprint: token.trim(), expiresAt: Number(claims.exp) * 1000 };
}

interface Logged {
  id: string;
  /** Epoch ms of the line (whole seconds: logrus' text format). */
  at: number;
}

interface NodeEvents {
  /** "Handling message <id> for choria_provision#reprovision": a request it ran. */
  reprovisions: Logged[];
  /** "Denying ... access to choria_provision#reprovision ... for request <id>" (a denied request is not "handled"). */
  denials: Logged[];
  /** "Message <id> ... for agent choria_provision created at <t> is too old": dropped unrun; `createdAt` is the request's own time. */
  tooOld: Array<Logged & { createdAt: number }>;
  /** "Restarting server via request": the restart after `configure`, back into normal mode. */
  restarts: number[];
  /** The boot lines of a server whose server JWT had expired. */
  expiredAtBoot: string[];
  lines: string[];
}

const lineTime = (line: string) => Date.parse(/time="([^"]+)"/.exec(line)?.[1] ?? "");

/** Go's time.Time String(): `2006-01-02 15:04:05.999999999 -0700 MST`. */
function goTime(text: string): number {
  const match = /(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d+)? ([+-]\d{2})(\d{2})/.exec(text);
  if (!match) return Number.NaN;
  return Date.parse(`${match[1]}T${match[2]}${(match[3] ?? "").slice(0, 4)}${match[4]}:${match[5]}`);
}

async function nodeEvents(node: RealNode): Promise<NodeEvents> {
  const lines = (await node.log()).split("\n");
  const logged = (pattern: RegExp) => lines.flatMap((line) => {
    const id = pattern.exec(line)?.[1];
    return id ? [{ id, at: lineTime(line) }] : [];
  });
  return {
    reprovisions: logged(/Handling message ([0-9A-Za-z]+) for choria_provision#reprovision from /),
    // The id ends the message: logrus closes the quoted msg right after it.
    denials: logged(/Denying \S+ access to choria_provision#reprovision based on authorization policy for request ([0-9A-Za-z]+)/),
    tooOld: lines.flatMap((line) => {
      const match = /Message ([0-9A-Za-z]+) from \S+ for agent choria_provision created at (.+?) is too old/.exec(line);
      return match ? [{ id: match[1]!, at: lineTime(line), createdAt: goTime(match[2]!) }] : [];
    }),
    restarts: lines.filter((line) => /Restarting server via request /.test(line)).map(lineTime),
    expiredAtBoot: lines.filter((line) => /server token .* is expired, reprovisioning|Switching to provisioning configuration/.test(line)),
    lines,
  };
}

// ---------------------------------------------------------------------------------------------
// What the target broker carried

interface BrokerSend {
  identity: string;
  id: string;
  /** When the observer got it (epoch ms). */
  at: number;
  /** The request's own time (the gate check's, whole seconds) and TTL, as the node judges its age. */
  envelopeAt: number;
  ttlMs: number;
}

/** Every choria_provision#reprovision request on the target broker, from an observer subscribed to every node's subject. */
class ReprovisionWatch {
  readonly sends: BrokerSend[] = [];
  private constructor(private readonly nc: NatsConnection) {}

  static async on(fleet: RealFleet): Promise<ReprovisionWatch> {
    const options = await brokerConnectOptions(fleet.targetBroker, fleet.targetCa.certPem, { certificate: fleet.targetObserverCertificate }, "renewal-offline-watch");
    const watch = new ReprovisionWatch(await connect(options));
    const subscription = watch.nc.subscribe("*.node.>");
    void (async () => {
      for await (const message of subscription) {
        const at = Date.now();
        try {
          const request = decodeRequest(message.data);
          // The payload carries the provisioning token: only its action is read.
          const { action } = JSON.parse(new TextDecoder().decode(request.payload)) as { action?: string };
          if (request.agent !== "choria_provision" || action !== "reprovision") continue;
          const identity = message.subject.slice(message.subject.indexOf(".node.") + ".node.".length);
          watch.sends.push({ identity, id: request.id, at, envelopeAt: request.timeSeconds * 1000, ttlMs: request.ttl * 1000 });
        } catch {
          // Not a Choria request (another observer's traffic): not ours to count.
        }
      }
    })();
    await watch.nc.flush();
    return watch;
  }

  to(identity: string): BrokerSend[] {
    return this.sends.filter((send) => send.identity === identity);
  }

  close(): Promise<void> {
    return this.nc.close();
  }
}

// ---------------------------------------------------------------------------------------------
// What an operator sees: `status` and the gauges, sampled

interface StatusSample {
  /** When the status call started and ended. */
  from: number;
  at: number;
  report: RenewalReport;
  /** Gauge values the renew runs emitted since the previous sample, and since when. */
  since: number;
  atRisk: number[];
  expired: number[];
}

class StatusSampler {
  readonly samples: StatusSample[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(private readonly provisioned: ProvisionedFleet) {
    this.loop = this.sample();
  }

  private async sample(): Promise<void> {
    const deployment = this.provisioned.stack.deployments[0]!;
    let since = Date.now();
    let seen = { atRisk: 0, expired: 0 };
    while (!this.stopped) {
      const atRisk = deployment.metrics.values(EXTRA_METRIC.renewalHostsAtRisk);
      const expired = deployment.metrics.values(EXTRA_METRIC.credentialsExpired);
      const read = Date.now();
      const status = await deployment.app.status().catch(() => undefined);
      if (status) {
        this.samples.push({ from: read, at: Date.now(), report: status.renewal, since, atRisk: atRisk.slice(seen.atRisk), expired: expired.slice(seen.expired) });
        seen = { atRisk: atRisk.length, expired: expired.length };
        since = read;
      }
      await new Promise((resolve) => setTimeout(resolve, STATUS_EVERY_MS));
    }
  }

  last(): StatusSample {
    return this.samples.at(-1)!;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

// ---------------------------------------------------------------------------------------------
// Faults: the node's server process (the wrapper shell's only child) killed, frozen or continued

async function serverPid(node: RealNode): Promise<number> {
  const children = await readFile(`/proc/${node.pid}/task/${node.pid}/children`, "utf8").catch(() => "");
  const pid = Number(children.trim().split(" ")[0]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`${node.identity}: no server process under ${node.pid}`);
  return pid;
}

/** SIGKILL: the server dies as in a crash, and its wrapper with it. */
async function killServer(node: RealNode): Promise<void> {
  process.kill(await serverPid(node), "SIGKILL");
  await waitUntil(() => (node.running ? `${node.identity} still running` : undefined), 10_000);
}

/** Servers frozen with SIGSTOP: continued when a test stops early, so none is left for the harness to kill. */
const frozenPids = new Set<number>();

async function freeze(node: RealNode): Promise<number> {
  const pid = await serverPid(node);
  frozenPids.add(pid);
  process.kill(pid, "SIGSTOP");
  await waitUntilAsync(async () => (/^\d+ \(.*\) T /.test(await readFile(`/proc/${pid}/stat`, "utf8")) ? undefined : `${node.identity} not stopped`), 10_000, 50);
  return pid;
}

function thaw(pid: number): void {
  if (frozenPids.delete(pid)) process.kill(pid, "SIGCONT");
}

// ---------------------------------------------------------------------------------------------
// One fleet's run

interface Interval {
  identity: string;
  from: number;
  to: number;
}

interface OfflineRun {
  provisioned: ProvisionedFleet;
  watch: ReprovisionWatch;
  sampler: StatusSampler;
  credential: (identity: string) => Promise<Credential | undefined>;
  /** Each node's credentials as first provisioned. */
  first: Map<string, Credential>;
  /** When a node was not running: killed or stopped, until it was back on the target broker. */
  downs: Interval[];
  /** When a node's server was frozen (SIGSTOP to SIGCONT). */
  frozen: Interval[];
  /** Each node's renewal as its log shows it: the request it ran and its restart into normal mode. */
  renewed: Map<string, { handled: Logged; restartedAt: number; arrivedAt: number }>;
  /** Who answered the admin's `choria ping` at the end. */
  pinged: string[];
  /** What each node logged, at the end. */
  events: Map<string, NodeEvents>;
}

const node = (run: OfflineRun, identity: string) => run.provisioned.fleet.nodes.get(identity)!;
const expiryOf = (run: OfflineRun, identity: string) => run.first.get(identity)!.expiresAt;
const untilInstant = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));

/** Provisions the fleet (made by `make`, not started) with an observer on the target broker and a status sampler. */
async function startRun(make: () => Promise<ProvisionedFleet>, credentialOf: (provisioned: ProvisionedFleet, identity: string) => Promise<Credential | undefined>, all: string[]): Promise<OfflineRun> {
  const provisioned = await make();
  try {
    const watch = await ReprovisionWatch.on(provisioned.fleet);
    await provisioned.fleet.startAll();
    provisioned.stack.start();
    await waitForArrivals(provisioned, all, 180_000);
    const sampler = new StatusSampler(provisioned);
    const credential = (identity: string) => credentialOf(provisioned, identity);
    const first = new Map<string, Credential>();
    for (const identity of all) first.set(identity, (await credential(identity))!);
    return { provisioned, watch, sampler, credential, first, downs: [], frozen: [], renewed: new Map(), pinged: [], events: new Map() };
  } catch (error) {
    await provisioned.stop();
    throw error;
  }
}

/** The instant renewal may first send the host reprovision (its place in the window), from the expiry the node holds. */
function placeInWindow(run: OfflineRun, identity: string): number {
  // renew.before is a duration here: the window does not depend on the credential's kind or issue time.
  const host: HostExpiry = { identity, state: "provisioned", credentials: { expiresAt: expiryOf(run, identity), issuedAt: 0, kind: "server_jwt" } };
  return renewableAt(host, { ms: BEFORE_S * 1000 });
}

/** Waits until shortly before renewal would send to the first of `identities`, and checks it has not sent to any yet. */
async function untilJustBeforeRenewal(run: OfflineRun, identities: string[]): Promise<void> {
  await untilInstant(Math.min(...identities.map((identity) => placeInWindow(run, identity))) - FAULT_LEAD_MS);
  for (const identity of identities) {
    if (run.watch.to(identity).length > 0) throw new Error(`renewal sent ${identity} reprovision before the fault could land (provisioning took too long)`);
  }
}

/** The first reprovision the target broker carried to `identity`, and the stack's word that it got no answer. */
async function firstUnansweredSend(run: OfflineRun, identity: string): Promise<BrokerSend> {
  const bound = expiryOf(run, identity) - Date.now();
  await waitUntil(() => (run.watch.to(identity).length > 0 ? undefined : `no reprovision to ${identity} on the target broker`), bound);
  const noAnswer = () => run.provisioned.logs.of(NO_ANSWER).some((record) => record.attributes?.identity === identity);
  await waitUntil(() => (noAnswer() ? undefined : `renewal did not log that ${identity} gave no answer`), bound);
  return run.watch.to(identity)[0]!;
}

/** Waits until the node ran a reprovision, was restarted into normal mode after it and holds new credentials, all before `by`. */
async function renewedAtNode(run: OfflineRun, identity: string, by: number): Promise<void> {
  await waitUntilAsync(async () => {
    const events = await nodeEvents(node(run, identity));
    // Read while the node may be rewriting it: a file half written is not new credentials yet.
    const now = await run.credential(identity).catch(() => undefined);
    for (const handled of events.reprovisions) {
      const restartedAt = events.restarts.find((at) => at >= handled.at);
      if (restartedAt !== undefined && now !== undefined && now.fingerprint !== run.first.get(identity)!.fingerprint) {
        run.renewed.set(identity, { handled, restartedAt, arrivedAt: Number.NaN });
        return undefined;
      }
    }
    return `${identity} not renewed yet (${events.reprovisions.length} reprovision(s) run, ${events.restarts.length} restart(s))`;
  }, by - Date.now(), 1_000);
  const renewed = run.renewed.get(identity)!;
  renewed.arrivedAt = await backOnTarget(run, identity, renewed.restartedAt);
}

/** Waits for the node's startup event on the target broker after `since` (whole-second log times: one second of slack). */
async function backOnTarget(run: OfflineRun, identity: string, since: number): Promise<number> {
  const arrival = () => run.provisioned.targetEvents.of("startup").find((event) => event.identity === identity && event.at >= since - 1_000);
  await waitUntil(() => (arrival() ? undefined : `${identity} did not arrive on the target broker`), PROVISION_BOUND_MS);
  return arrival()!.at;
}

/**
 * Waits until a status sample taken after the host's expiry lists it as expired and a renew run
 * after its expiry counted expired credentials: a renew run comes every 10 s, and one that waited
 * out an unanswered request (22 s) holds the next back.
 */
async function expiredInStatus(run: OfflineRun, identity: string): Promise<void> {
  const expiry = expiryOf(run, identity);
  const after = () => run.sampler.samples.filter((sample) => sample.from > expiry);
  const listed = () => after().some((sample) => sample.report.expiry.expiredHosts.some((host) => host.identity === identity));
  const counted = () => after().some((sample) => sample.since > expiry && sample.expired.some((value) => value >= 1));
  await waitUntil(() => (listed() && counted() ? undefined : `status did not list ${identity} as expired, or no renew run counted it`), expiry - Date.now() + 60_000);
}

/**
 * Stops renewal, waits until every node that ran a reprovision was restarted into normal mode after
 * it (one sent in renewal's last run may still be on its way) and each of `expected` answers the
 * admin's ping, and collects what the nodes logged.
 */
async function finish(run: OfflineRun, expected: string[]): Promise<void> {
  const { provisioned } = run;
  await Promise.all(provisioned.stack.deployments.flatMap((deployment) => deployment.sources.filter((source) => source.name.endsWith("-renew")).map((source) => source.stop(60_000))));
  await waitUntilAsync(async () => {
    const pending: string[] = [];
    for (const identity of provisioned.fleet.nodes.keys()) {
      const { reprovisions, restarts } = await nodeEvents(node(run, identity));
      const last = reprovisions.at(-1);
      if (last && !restarts.some((at) => at >= last.at)) pending.push(identity);
    }
    return pending.length === 0 ? undefined : `not back in normal mode after reprovision: ${pending.join(", ")}`;
  }, PROVISION_BOUND_MS, 1_000);
  const admin = await provisioned.fleet.adminClient();
  await waitUntilAsync(async () => {
    const ping = await admin.choria(["ping"]);
    run.pinged = ping.stdout.split("\n").flatMap((line) => /^(\S+)\s+time=\d+/.exec(line.trim())?.[1] ?? []);
    const missing = expected.filter((identity) => !run.pinged.includes(identity));
    return missing.length === 0 ? undefined : `no ping reply from ${missing.join(", ")}`;
  }, PROVISION_BOUND_MS, 2_000);
  await run.sampler.stop();
  // Every request the broker carried to a node that was running has reached the node's log.
  await waitUntilAsync(async () => {
    for (const identity of provisioned.fleet.nodes.keys()) run.events.set(identity, await nodeEvents(node(run, identity)));
    const missing = run.watch.sends.filter((send) => !isDown(run, send) && !loggedRequests(run).has(send.id));
    return missing.length === 0 ? undefined : `not in the nodes' logs: ${missing.map((send) => `${send.identity} ${send.id}`).join(", ")}`;
  }, 10_000, 500);
}

async function stopRun(run: OfflineRun): Promise<void> {
  for (const pid of frozenPids) thaw(pid);
  await run.sampler.stop();
  await run.watch.close().catch(() => undefined);
  await run.provisioned.stop();
}

// ---------------------------------------------------------------------------------------------
// The two fleets

const v1Fleet = () =>
  provisionedFleet({
    identities: [GOOD_V1, KILLED],
    ...v1RenewalFleet(TIMING, VALIDITY_S, inject("dynamoEndpoint")),
  }).then(async (provisioned) => {
    await provisioned.fleet.addNode(REFUSING, { start: false, policies: { choria_provision: "policy default deny\n" } });
    return provisioned;
  });

const v2Fleet = () =>
  provisionedFleet({
    identities: V2_NODES,
    protocolV2: true,
    features: ["jwt", "ed25519"],
    dynamoDbEndpoint: inject("dynamoEndpoint"),
    clientCredentials: { siteSigned: true, agents: ["choria_provision.reprovision"] },
    config: (fleet) => ({ server_jwt_validity: `${VALIDITY_S}s`, renew: { ...renewSection(TIMING, fleet.targetBroker.url), collective: "mcollective" } }),
  });

const TIMING = { beforeS: BEFORE_S, rate: RATE, maxInFlight: MAX_IN_FLIGHT, timeoutS: TIMEOUT_S };

/** v1: KILLED crashes just before its renewal and is started again once renewal saw no answer; REFUSING runs out. */
async function v1Scenario(run: OfflineRun): Promise<void> {
  const killed = node(run, KILLED);
  await untilJustBeforeRenewal(run, [KILLED]);
  const killedAt = Date.now();
  await killServer(killed);
  await firstUnansweredSend(run, KILLED);
  const restartedAt = Date.now();
  await killed.start();
  run.downs.push({ identity: KILLED, from: killedAt, to: await backOnTarget(run, KILLED, restartedAt) });
  await renewedAtNode(run, KILLED, expiryOf(run, KILLED));
  await renewedAtNode(run, GOOD_V1, expiryOf(run, GOOD_V1));
  await expiredInStatus(run, REFUSING);
  // REFUSING's certificate has expired: it answers only while its old connection lasts.
  await finish(run, [GOOD_V1, KILLED]);
}

/** v2: FROZEN is frozen just before its renewal and continued once the request it got is too old; EXPIRING stays stopped past its expiry, then starts. */
async function v2Scenario(run: OfflineRun): Promise<void> {
  const expiring = node(run, EXPIRING);
  await untilJustBeforeRenewal(run, [FROZEN, EXPIRING]);
  const frozenAt = Date.now();
  const pid = await freeze(node(run, FROZEN));
  const stoppedAt = Date.now();
  await expiring.stop();
  const send = await firstUnansweredSend(run, FROZEN);
  // Past its TTL on the node's clock (whole seconds), the request is dropped as too old, not run.
  await untilInstant(send.envelopeAt + send.ttlMs + 2_000);
  thaw(pid);
  run.frozen.push({ identity: FROZEN, from: frozenAt, to: Date.now() });
  await renewedAtNode(run, FROZEN, expiryOf(run, FROZEN));
  await renewedAtNode(run, GOOD_V2, expiryOf(run, GOOD_V2));
  await expiredInStatus(run, EXPIRING);
  const startedAt = Date.now();
  await expiring.start();
  // go-choria >= 0.30 sees its expired server JWT at boot and goes back to provisioning mode.
  await waitUntilAsync(async () => {
    const now = await run.credential(EXPIRING).catch(() => undefined);
    return now && now.expiresAt > expiryOf(run, EXPIRING) ? undefined : `${EXPIRING} holds no new server JWT`;
  }, PROVISION_BOUND_MS, 1_000);
  const events = await nodeEvents(expiring);
  console.log(`renewal-offline: ${EXPIRING} at boot after its expiry:\n${events.expiredAtBoot.join("\n")}`);
  run.downs.push({ identity: EXPIRING, from: stoppedAt, to: await backOnTarget(run, EXPIRING, events.restarts.find((at) => at >= startedAt - 1_000) ?? startedAt) });
  await finish(run, V2_NODES);
}

let v1Setup: Promise<OfflineRun>;
let v2Setup: Promise<OfflineRun>;

async function scenario(make: () => Promise<ProvisionedFleet>, credentialOf: Parameters<typeof startRun>[1], all: string[], act: (run: OfflineRun) => Promise<void>): Promise<OfflineRun> {
  const started = await startRun(make, credentialOf, all);
  try {
    await act(started);
    return started;
  } catch (error) {
    const logs = await Promise.all(all.map(async (identity) => `--- ${identity}\n${(await nodeEvents(node(started, identity))).lines.slice(-40).join("\n")}`));
    console.error(`renewal-offline: ${String(error)}\n${logs.join("\n")}`);
    await stopRun(started);
    throw error;
  }
}

beforeAll(() => {
  v1Setup = scenario(v1Fleet, certificateCredential, V1_NODES, v1Scenario);
  v2Setup = scenario(v2Fleet, serverJwtCredential, V2_NODES, v2Scenario);
  // Each describe block awaits its own and fails with its own error.
  return Promise.allSettled([v1Setup, v2Setup]).then(() => undefined);
}, 600_000);

afterAll(async () => {
  for (const setup of await Promise.allSettled([v1Setup, v2Setup])) if (setup.status === "fulfilled") await stopRun(setup.value);
}, 120_000);

describe("real fleet renewal with nodes offline, protocol v1 with jwt + pki", () => {
  let v1: OfflineRun;

  beforeAll(async () => {
    v1 = await v1Setup;
  });

  it("renews a node killed at its renewal moment once it is back before its certificate expires", async () => {
    // Arrange: the request that found the node dead, and the node as renewal left it.
    const down = v1.downs.find((interval) => interval.identity === KILLED)!;
    const [missed] = v1.watch.to(KILLED);
    const { handled, restartedAt, arrivedAt } = v1.renewed.get(KILLED)!;
    const before = v1.first.get(KILLED)!;

    // Act: what the node holds now.
    const verified = await run("openssl", ["verify", "-CAfile", v1.provisioned.fleet.ca.certFile, certificateFile(v1.provisioned, KILLED)]);
    const now = (await certificateCredential(v1.provisioned, KILLED))!;

    // Assert: the first request left while it was dead and reached nothing; renewal marked it and
    // tried again once it was back; the request it ran renewed it before its certificate expired.
    expect(missed!.at).toBeGreaterThan(down.from);
    expect(missed!.at).toBeLessThan(down.to);
    expect(v1.events.get(KILLED)!.reprovisions.map((logged) => logged.id)).not.toContain(missed!.id);
    expect(marksShown(v1, KILLED)[0]).toMatchObject({ attempts: 1, reason: expect.stringContaining(`not provisioned again within ${TIMEOUT_S}s`) });
    expect(handled.at).toBeGreaterThan(down.to - 1_000);
    expect(handled.at).toBeLessThan(before.expiresAt);
    expect(verified.stdout).toContain(": OK");
    expect(now.fingerprint).not.toBe(before.fingerprint);
    expect(now.expiresAt).toBeGreaterThan(before.expiresAt);
    expect((await node(v1, KILLED).config())?.["plugin.choria.server.provision"]).toBe("false");
    expect(arrivedAt).toBeGreaterThanOrEqual(restartedAt - 1_000);
    expect(v1.pinged).toContain(KILLED);
    expect(v1.sampler.last().report.failed.map((mark) => mark.identity)).not.toContain(KILLED);
  });

  it("tries the refusing node again while its certificate is valid, raises the at-risk signal before it expires and lists it expired with the re-enrol action", async () => {
    // Arrange
    const { denials, reprovisions } = v1.events.get(REFUSING)!;
    const expiry = expiryOf(v1, REFUSING);

    // Act
    const marks = marksShown(v1, REFUSING, 2);

    // Assert: refused more than once (a refusal is tried again), never run, the node kept its certificate.
    expect(denials.length).toBeGreaterThanOrEqual(2);
    expect(reprovisions).toEqual([]);
    expect((await certificateCredential(v1.provisioned, REFUSING))!.fingerprint).toBe(v1.first.get(REFUSING)!.fingerprint);
    for (const mark of marks) expect(mark.reason).toContain("not authorized");
    expectAtRiskBeforeExpiry(v1, REFUSING, expiry);
    expectListedExpired(v1, REFUSING, expiry, "certificate");
    expect(v1.sampler.last().report.paused).toBeUndefined();
  });

  it("holds renew.rate and renew.max_in_flight counting refused and unanswered requests (from the nodes' logs and the broker)", () => {
    expectBoundsHeld(v1, [GOOD_V1, KILLED]);
  });
});

describe("real fleet renewal with nodes offline, protocol v2 with jwt + ed25519", () => {
  let v2: OfflineRun;

  beforeAll(async () => {
    v2 = await v2Setup;
  });

  it("renews a node frozen at its renewal moment once it is continued before its server JWT expires", async () => {
    // Arrange
    const frozen = v2.frozen.find((interval) => interval.identity === FROZEN)!;
    const [missed] = v2.watch.to(FROZEN);
    const { handled, restartedAt, arrivedAt } = v2.renewed.get(FROZEN)!;
    const before = v2.first.get(FROZEN)!;

    // Act
    const now = (await serverJwtCredential(v2.provisioned, FROZEN))!;
    const dropped = v2.events.get(FROZEN)!.tooOld.find((logged) => logged.id === missed!.id);

    // Assert: the request that came while it was frozen was dropped as too old once it was continued
    // (its own time is the one the broker carried); renewal marked the host and tried again.
    expect(missed!.at).toBeGreaterThan(frozen.from);
    expect(missed!.at).toBeLessThan(frozen.to);
    expect(dropped, "the frozen node's log has the request it got while frozen").toBeDefined();
    // v2 carries nanoseconds, the broker-side record whole seconds.
    expect(Math.floor(dropped!.createdAt / 1000) * 1000).toBe(missed!.envelopeAt);
    expect(dropped!.at).toBeGreaterThanOrEqual(Math.floor(frozen.to / 1000) * 1000);
    expect(marksShown(v2, FROZEN)[0]).toMatchObject({ attempts: 1, reason: expect.stringContaining(`not provisioned again within ${TIMEOUT_S}s`) });
    expect(handled.at).toBeLessThan(before.expiresAt);
    expect(now.fingerprint).not.toBe(before.fingerprint);
    expect(now.expiresAt).toBeGreaterThan(before.expiresAt);
    expect((await node(v2, FROZEN).config())?.["plugin.choria.server.provision"]).toBe("false");
    expect(arrivedAt).toBeGreaterThanOrEqual(restartedAt - 1_000);
    expect(v2.pinged).toContain(FROZEN);
    expect(v2.sampler.last().report.failed.map((mark) => mark.identity)).not.toContain(FROZEN);
  });

  it("raises the at-risk signal for a node kept offline, lists it expired with the restart action, and provisions it again when it is restarted", async () => {
    // Arrange
    const expiry = expiryOf(v2, EXPIRING);
    const down = v2.downs.find((interval) => interval.identity === EXPIRING)!;

    // Act
    const events = v2.events.get(EXPIRING)!;
    const now = (await serverJwtCredential(v2.provisioned, EXPIRING))!;

    // Assert: every request renewal sent it came while it was stopped, and none after its expiry.
    const sends = v2.watch.to(EXPIRING);
    expect(sends.length).toBeGreaterThanOrEqual(1);
    for (const send of sends) expect([send.at > down.from, send.envelopeAt < expiry]).toEqual([true, true]);
    expectAtRiskBeforeExpiry(v2, EXPIRING, expiry);
    expectListedExpired(v2, EXPIRING, expiry, "server_jwt");
    // At the node: its boot saw the expired server JWT and went back to provisioning; it holds a new one and is back.
    expect(events.expiredAtBoot.join("\n")).toMatch(/The existing server token \S+ is expired, reprovisioning/);
    expect(now.expiresAt).toBeGreaterThan(expiry);
    expect((await node(v2, EXPIRING).config())?.["plugin.choria.server.provision"]).toBe("false");
    expect(v2.pinged).toContain(EXPIRING);
  });

  it("holds renew.rate and renew.max_in_flight counting unanswered requests (from the nodes' logs and the broker)", () => {
    expectBoundsHeld(v2, [GOOD_V2, FROZEN]);
  });
});

// ---------------------------------------------------------------------------------------------
// Checks

type RenewalMarkShown = RenewalReport["failed"][number];

/** The renewal marks status showed for the host, one per attempt, first attempt first; at least `attempts` of them. */
function marksShown(run: OfflineRun, identity: string, attempts = 1): RenewalMarkShown[] {
  const byAttempt = new Map<number, RenewalMarkShown>();
  for (const sample of run.sampler.samples) for (const mark of sample.report.failed) if (mark.identity === identity && !byAttempt.has(mark.attempts)) byAttempt.set(mark.attempts, mark);
  const marks = [...byAttempt.values()].sort((a, b) => a.attempts - b.attempts);
  expect(marks.length, `status showed ${identity} failed ${marks.length} time(s)`).toBeGreaterThanOrEqual(attempts);
  // Each one is tried again while its credentials are valid.
  for (const mark of marks) expect(mark.retryAt, `${identity} attempt ${mark.attempts}`).toBeLessThan(expiryOf(run, identity));
  return marks;
}

/**
 * Before the host expired and while it was in the last quarter of its window: status counted a host
 * at risk and listed this one as due next, and a renew run raised the at-risk gauge.
 */
function expectAtRiskBeforeExpiry(run: OfflineRun, identity: string, expiry: number): void {
  const inLastQuarter = run.sampler.samples.filter((sample) => sample.from >= expiry - AT_RISK_MS && sample.at < expiry);
  const shown = inLastQuarter.filter((sample) => sample.report.expiry.atRisk >= 1 && sample.report.expiry.next.some((host) => host.identity === identity));
  expect(shown.length, `status showed ${identity} at risk before it expired`).toBeGreaterThan(0);
  const raised = inLastQuarter.filter((sample) => sample.since >= expiry - AT_RISK_MS && sample.atRisk.some((value) => value >= 1));
  expect(raised.length, `a renew run raised ${EXTRA_METRIC.renewalHostsAtRisk} while ${identity} was at risk`).toBeGreaterThan(0);
}

function expectListedExpired(run: OfflineRun, identity: string, expiry: number, kind: "certificate" | "server_jwt"): void {
  const after = run.sampler.samples.filter((sample) => sample.from > expiry);
  const listed = after.flatMap((sample) => sample.report.expiry.expiredHosts.filter((host) => host.identity === identity));
  // The advice docs/renewal.md gives for the credential that ran out.
  const action = kind === "server_jwt" ? "restart the node's Choria server: go-choria 0.30.0 and later go back to provisioning mode at start" : "re-enrol the node";
  expect(listed[0]).toEqual({ identity, expiredAt: expiry, kind, action: expect.stringContaining(action) });
  expect(after.some((sample) => sample.report.expiry.expired >= 1)).toBe(true);
  expect(after.some((sample) => sample.since > expiry && sample.expired.some((value) => value >= 1)), `${EXTRA_METRIC.credentialsExpired} raised after ${identity} expired`).toBe(true);
}

/** Whether the node was down (killed or stopped) when the broker carried the request: it never reached it. */
function isDown(run: OfflineRun, send: BrokerSend): boolean {
  return run.downs.some((down) => down.identity === send.identity && send.at >= down.from && send.at <= down.to);
}

/** Every reprovision request a node logged (run, denied or dropped as too old), by id, with the node's time for it. */
function loggedRequests(run: OfflineRun): Map<string, { identity: string; at: number; ran: boolean }> {
  const logged = new Map<string, { identity: string; at: number; ran: boolean }>();
  for (const [identity, events] of run.events) {
    for (const entry of events.reprovisions) logged.set(entry.id, { identity, at: entry.at, ran: true });
    for (const entry of events.denials) logged.set(entry.id, { identity, at: entry.at, ran: false });
    // A request dropped after a freeze is logged late; its own time is when it left.
    for (const entry of events.tooOld) logged.set(entry.id, { identity, at: entry.createdAt, ran: false });
  }
  return logged;
}

/**
 * Sends: every reprovision request the target broker carried, each at the node's time for it (the
 * line it logged) or, for a node that was down, the broker's. Each reached its node unless the node
 * was down, and each a node logged went through the broker. At most RATE of them in any minute
 * (by the nodes' whole-second times, LOG_SLACK_MS given; by the requests' own times, exactly).
 * Out of service: a node that ran reprovision until it was restarted into normal mode (within
 * renew.timeout); a request that got no answer holds its host in flight for renew.timeout unless
 * the host came back provisioned sooner. At most MAX_IN_FLIGHT at once.
 */
function expectBoundsHeld(run: OfflineRun, renewed: string[]): void {
  const logged = loggedRequests(run);
  const sends = run.watch.sends;
  for (const send of sends) if (!isDown(run, send)) expect(logged.get(send.id)?.identity, `${send.identity} logged ${send.id}`).toBe(send.identity);
  for (const [id, entry] of logged) expect(sends.some((send) => send.id === id), `the broker carried ${entry.identity}'s ${id}`).toBe(true);
  for (const identity of renewed) expect(run.events.get(identity)!.reprovisions.length, identity).toBeGreaterThanOrEqual(1);

  const perMinute = (times: number[], slackMs: number) => Math.max(...times.map((at) => times.filter((other) => other >= at && other < at + 60_000 - slackMs).length));
  const nodeTimes = sends.map((send) => logged.get(send.id)?.at ?? send.at);
  expect(perMinute(nodeTimes, LOG_SLACK_MS), `sends by the nodes' times ${describeTimes(nodeTimes)}`).toBeLessThanOrEqual(RATE);
  expect(perMinute(sends.map((send) => send.envelopeAt), 0)).toBeLessThanOrEqual(RATE);

  const outages = outOfService(run, logged);
  for (const outage of outages) {
    if (outage.ran) expect(outage.to - outage.from, `${outage.identity} out of service`).toBeLessThanOrEqual(TIMEOUT_S * 1000);
    // Log times are whole seconds: an outage that starts in the second another ends does not overlap it.
    const overlapping = outages.filter((other) => other.from <= outage.from && other.to > outage.from);
    expect(overlapping.length, `in flight at ${new Date(outage.from).toISOString()}: ${overlapping.map((other) => other.identity).join(", ")}`).toBeLessThanOrEqual(MAX_IN_FLIGHT);
  }
  const start = Math.min(...nodeTimes);
  const timeline = sends.map((send, index) => `${send.identity.split(".")[0]}@+${Math.round((nodeTimes[index]! - start) / 1000)}s:${kindOf(run, send, logged)}`);
  const atOnce = Math.max(...outages.map((outage) => outages.filter((other) => other.from <= outage.from && other.to > outage.from).length));
  console.log(`renewal-offline ${run.provisioned.fleet.protocolV2 ? "v2" : "v1"}: ${sends.length} reprovision requests, at most ${perMinute(nodeTimes, 0)} in a minute, ${atOnce} in flight at once: ${timeline.join(" ")}`);
}

function kindOf(run: OfflineRun, send: BrokerSend, logged: Map<string, { identity: string; at: number; ran: boolean }>): string {
  const entry = logged.get(send.id);
  if (!entry) return "node-down";
  if (entry.ran) return "ran";
  return run.events.get(send.identity)!.tooOld.some((dropped) => dropped.id === send.id) ? "too-old" : "denied";
}

function outOfService(run: OfflineRun, logged: Map<string, { identity: string; at: number; ran: boolean }>): Array<Interval & { ran: boolean }> {
  const restartAfter = (identity: string, at: number) => run.events.get(identity)!.restarts.find((restart) => restart >= at) ?? Number.POSITIVE_INFINITY;
  const ran = [...run.events].flatMap(([identity, events]) => events.reprovisions.map((entry) => ({ identity, from: entry.at, to: restartAfter(identity, entry.at), ran: true })));
  // Renewal's clock stamps the request before it leaves and settles it at a run after the timeout: a second of slack.
  const unanswered = run.watch.sends
    .filter((send) => !logged.has(send.id) || logged.get(send.id)!.identity === send.identity && run.events.get(send.identity)!.tooOld.some((entry) => entry.id === send.id))
    .map((send) => ({ identity: send.identity, from: send.at, to: Math.min(send.at + TIMEOUT_S * 1000 - 1_000, restartAfter(send.identity, send.at)), ran: false }));
  return [...ran, ...unanswered];
}

function describeTimes(times: number[]): string {
  const start = Math.min(...times);
  return `[${[...times].sort((a, b) => a - b).map((at) => `+${Math.round((at - start) / 1000)}s`).join(" ")}]`;
}
