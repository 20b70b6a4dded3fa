/**
 * Renewal across a failover on the local stack: a leader and a standby deployment of one site,
 * sharing the site's lease table and its one admission table (the registry and renewal's state),
 * as production deployments do with the `leaseTable` and `admissionTable` params. The leader
 * provisions simulated nodes with server JWTs valid 270 s and renewal on, and is killed before any
 * of them is due; the standby wins the lease and, knowing the hosts from the shared registry,
 * renews every one before its JWT expires. The nodes' own records decide: which requests they ran,
 * from which deployment (each has its own `callerid`), when, and the JWT each holds at the end; and
 * the successor's `status` lists its predecessor's hosts with their expiries.
 *
 * The bounds are the protocol's: the leader dies once its ticks have taken the fleet's startup
 * events (a tick every renew_interval, armed by its keeper every keeper period), well before the
 * renewal window opens (`before` 180 s of 270 s: 90 s after provisioning), so the standby is the only one that can send. It takes the lease once the
 * lease's expiry, skew bound and delivery horizon have passed (~63 s with fast timings), which it
 * must do before the first JWT expires; each node's renewal is then bound by its expiry, and its
 * way back by `renew.timeout`.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startNats, type RunningNats } from "../../dev/local/services";
import { startLocalStack, type LocalStack } from "../../dev/local/stack";
import { decodeJwt } from "../../lib/crypto/jwt";
import { awaitLifecycleEventsHandled, expectedExpiries, hostExpiries, killLeaderAndAwaitTakeover, type HostExpiries, type Takeover } from "../support/failover";
import { waitUntilAsync } from "../support/wait";

const NODES = 4;
const DEPLOYMENTS = ["blue", "green"];
const VALIDITY_MS = 270_000;
const BEFORE_MS = 180_000;
const RATE = 4;
const MAX_IN_FLIGHT = 2;
const RENEW_TIMEOUT_MS = 90_000;
const callerOf = (deployment: string) => `.choria=provisioner-${deployment}`;

describe("renewal after the leader crashed, on the local stack", () => {
  let nats: RunningNats;
  let stack: LocalStack;
  let takeover: Takeover;
  /** Each node's first server JWT expiry (epoch ms), and what the leader's status said before it died. */
  const firstExpiry = new Map<string, number>();
  let leaderSaw: HostExpiries;
  let successorSaw: HostExpiries;

  const reprovisions = () => stack.fleet.record.filter((entry) => entry.action === "reprovision" && entry.outcome !== "dropped");
  const jwtExpiry = (identity: string) => Number(decodeJwt(stack.fleet.node(identity).serverJwt!).claims.exp) * 1000;

  beforeAll(async () => {
    nats = await startNats();
    stack = await startLocalStack({
      nodes: NODES,
      deployments: DEPLOYMENTS,
      fast: true,
      features: ["jwt", "ed25519"],
      distinctCallerIds: true,
      restartDelayMs: 200,
      nats,
      dynamoDbEndpoint: inject("dynamoEndpoint"),
      waitTimeSeconds: 1,
      config: () => ({
        server_jwt_validity: `${VALIDITY_MS / 1000}s`,
        // The simulated nodes' main collective is on the same broker.
        renew: { enabled: true, before: `${BEFORE_MS / 1000}s`, rate: RATE, max_in_flight: MAX_IN_FLIGHT, timeout: `${RENEW_TIMEOUT_MS / 1000}s`, broker_urls: [nats.url] },
      }),
    });
    stack.start();
    const { fleet } = stack;
    await fleet.waitFor(() => fleet.identities.every((identity) => fleet.node(identity).inNormalMode && fleet.node(identity).serverJwt !== undefined), 120_000);
    await stack.started;
    // The leader dies in its steady state: its ticks admitted every startup event the fleet
    // published (a crash with events still in the stream hands them to the successor, which admits
    // their hosts again under its term although they are provisioned by now).
    await awaitLifecycleEventsHandled(stack, Date.now() + 2 * (stack.timings.keeperRateMs + stack.timings.lifecycleTimeoutMs));
    for (const identity of fleet.identities) firstExpiry.set(identity, jwtExpiry(identity));
    const leader = stack.deployments.find((deployment) => deployment.id === DEPLOYMENTS[0])!;
    leaderSaw = hostExpiries(await leader.app.status());
    if (reprovisions().length > 0) throw new Error(`the leader renewed before it was killed: ${JSON.stringify(reprovisions())}`);
    // Without a successor the first JWT to expire is lost: that is the takeover's bound here.
    takeover = await killLeaderAndAwaitTakeover(stack, Math.min(...firstExpiry.values()));
    successorSaw = hostExpiries(await takeover.successor.app.status());
    const figures = { takeoverSeconds: (takeover.tookOverAt - takeover.killedAt) / 1000, protocolBoundSeconds: (takeover.protocolBound - takeover.killedAt) / 1000 };
    process.stdout.write(`renewal failover (simulator): ${takeover.killed.id}@${takeover.before.term} -> ${takeover.successor.id}@${takeover.after.term} ${JSON.stringify(figures)}\n`);
  }, 120_000 + VALIDITY_MS);

  afterAll(async () => {
    await stack?.stop();
    await nats?.stop();
  }, 30_000);

  it("moves the lease from the killed leader to the standby under a higher term", () => {
    expect({ killed: takeover.killed.id, successor: takeover.successor.id }).toEqual({ killed: DEPLOYMENTS[0], successor: DEPLOYMENTS[1] });
    expect(takeover.after.term).toBeGreaterThan(takeover.before.term);
    expect(takeover.successor.tables).toEqual(takeover.killed.tables);
  });

  it("shows in the successor's status every host its predecessor provisioned, with its server JWT's expiry", () => {
    const atTheNodes = expectedExpiries(firstExpiry);
    expect(leaderSaw).toEqual(atTheNodes);
    expect(successorSaw).toEqual(atTheNodes);
  });

  it(
    "renews every node from the successor before its server JWT expires: one reprovision each, a new JWT that expires later, back in normal mode",
    async () => {
      const { fleet } = stack;
      // A node sent reprovision just before its JWT expires has renew.timeout to be provisioned again.
      await untilEveryNode("not renewed", (identity) => fleet.node(identity).provisioned >= 2 && fleet.node(identity).inNormalMode, Math.max(...firstExpiry.values()) + RENEW_TIMEOUT_MS);
      // The renewed JWTs fall due again 60 s after they were issued and the checks judge the first
      // round: stop renewal's schedule, and let a node sent again meanwhile come back.
      await Promise.all(stack.deployments.flatMap((deployment) => deployment.sources.filter((source) => source.name.endsWith("-renew")).map((source) => source.stop(60_000))));
      await untilEveryNode("not back in normal mode", (identity) => fleet.node(identity).inNormalMode, Date.now() + RENEW_TIMEOUT_MS);
      const nowExpiry = new Map(fleet.identities.map((identity) => [identity, jwtExpiry(identity)]));
      const status = hostExpiries(await takeover.successor.app.status());

      for (const identity of fleet.identities) {
        const sent = reprovisions().filter((entry) => entry.identity === identity && entry.timeMs < reconfiguredAt(identity));
        expect({ identity, sent: sent.length, outcome: sent[0]?.outcome }).toEqual({ identity, sent: 1, outcome: 0 });
        expect(sent[0]!.caller.endsWith(callerOf(takeover.successor.id)), sent[0]!.caller).toBe(true);
        expect(sent[0]!.timeMs).toBeGreaterThan(takeover.killedAt);
        expect(sent[0]!.timeMs).toBeLessThan(firstExpiry.get(identity)!);
        expect(nowExpiry.get(identity)!).toBeGreaterThan(firstExpiry.get(identity)!);
      }
      expect(reprovisions().filter((entry) => !entry.caller.endsWith(callerOf(takeover.successor.id)))).toEqual([]);
      // The same hosts, now with their renewed credentials' expiry.
      expect(status).toEqual(expectedExpiries(nowExpiry));
    },
    VALIDITY_MS + 2 * RENEW_TIMEOUT_MS + 30_000,
  );

  /** When the node was configured the second time: the end of its first renewal. */
  function reconfiguredAt(identity: string): number {
    return stack.fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure")[1]?.timeMs ?? Number.POSITIVE_INFINITY;
  }

  function untilEveryNode(what: string, done: (identity: string) => boolean, deadline: number): Promise<void> {
    return waitUntilAsync(async () => {
      const pending = stack.fleet.identities.filter((identity) => !done(identity));
      return pending.length === 0 ? undefined : `${what}: ${pending.join(", ")}; reprovisions so far ${JSON.stringify(reprovisions())}`;
    }, Math.max(0, deadline - Date.now()));
  }
});
