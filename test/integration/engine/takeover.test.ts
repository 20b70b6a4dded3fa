/**
 * Two deployments of the provisioner contest one site's lease on DynamoDB Local. Deployment A is in
 * the middle of provisioning a node (its helper is slow) when deployment B takes the lease over;
 * A must not send the node anything once B's term has begun, and B must then be able to provision
 * the node (both deployments speak as the same Choria identity, so the node's lock does not stop B).
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { connect, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { LeaseLostError, PausedError } from "../../../lib/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import { LambdaHelperRunner } from "../../../lib/helper/lambda-runner";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import type { AnnounceRequest, ConditionalWrite, ExtendRequest, LeaseItem, LeaseStore, PeerRequest, ReleaseRequest, ClaimRequest } from "../../../lib/ports/lease-store";
import { LEASE_DEFAULTS } from "../../../lib/lease/settings";
import { freePort, LOCAL_AWS } from "../../../dev/local/services";
import { handler } from "../../../examples/helpers/lambda-helper";
import { realClock } from "../../support/fakes";
import { presentedJwt } from "../../support/server-jwt-expiry";
import { EngineHarness, executedBy, inProcessInvoke, LOCK_KEY, MJS_HELPER, recordsOf, restarted } from "./support";

/** The RPC client's default request TTL, v1 servers' minimum: how long a delayed request may still run. */
const DEFAULT_TTL_SECONDS = 30;

let harness: EngineHarness;
let deploymentBConnection: NatsConnection;

beforeAll(async () => {
  harness = await EngineHarness.start(inject("dynamoEndpoint"));
  deploymentBConnection = await connect({ servers: harness.nats.url });
});
afterEach(() => harness.stopFleets());
afterAll(async () => {
  await deploymentBConnection?.close();
  await harness?.stop();
});

/** The Lambda example helper behind an invocation that blocks until the test lets it finish. */
function slowLambdaHelper() {
  let release: () => void = () => {};
  let signalEntered: () => void = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  const entered = new Promise<void>((resolve) => (signalEntered = resolve));
  const invoke = inProcessInvoke(handler);
  const helper = new LambdaHelperRunner({
    name: "slow-example-helper",
    invoke: async (payload, options) => {
      signalEntered();
      await released;
      return invoke(payload, options);
    },
  });
  return { helper, entered, release };
}

/** Deployment A's view of the lease table; `sever()` points it at an endpoint nothing listens on. */
class SeverableStore implements LeaseStore {
  private severed = false;
  constructor(
    private readonly live: LeaseStore,
    private readonly unreachable: LeaseStore,
  ) {}
  sever(): void {
    this.severed = true;
  }
  private get target(): LeaseStore {
    return this.severed ? this.unreachable : this.live;
  }
  claim(request: ClaimRequest): Promise<ConditionalWrite> {
    return this.target.claim(request);
  }
  extend(request: ExtendRequest): Promise<ConditionalWrite> {
    return this.target.extend(request);
  }
  release(request: ReleaseRequest): Promise<ConditionalWrite> {
    return this.target.release(request);
  }
  markAnnounced(request: AnnounceRequest): Promise<ConditionalWrite> {
    return this.target.markAnnounced(request);
  }
  recordPeer(request: PeerRequest): Promise<void> {
    return this.target.recordPeer(request);
  }
  read(site: string): Promise<LeaseItem | undefined> {
    return this.target.read(site);
  }
}

/**
 * Past what a challenger must wait (expiry + skew bound + delivery horizon, the request TTL), on
 * every clock of the test: the deployments' and the node's, which judges the TTL of A's requests.
 */
const PAST_TAKEOVER_BOUND_MS = LEASE_DEFAULTS.leaseDurationMs + LEASE_DEFAULTS.skewBoundMs + DEFAULT_TTL_SECONDS * 1_000 + 5_000;

describe("a deployment deposed while it provisions a node", () => {
  let unreachableClient: DynamoDBClient;

  beforeAll(async () => {
    unreachableClient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: `http://127.0.0.1:${await freePort()}`, maxAttempts: 1 });
  });
  afterAll(() => unreachableClient?.destroy());

  it.each([
    ["its lease expired and deployment B took it over", false, /does not hold the lease/],
    ["its lease store became unreachable and deployment B took the lease over", true, /lease store for site .* could not be reached/],
  ])("when %s, sends the node nothing more, and B then provisions the node", async (_case, severStore, pauseReason) => {
    const identity = severStore ? "severed.example.net" : "contested.example.net";
    const time = realClock();
    const fleet = await harness.fleet({ identities: [identity], clock: time });
    const site = harness.newSite();
    const storeA = new SeverableStore(harness.store, new DynamoDbLeaseStore({ client: unreachableClient, tableName: harness.tableName }));
    const deploymentA = await harness.elected({ site, deploymentId: "deployment-a", clock: time, store: storeA });
    const slow = slowLambdaHelper();
    const a = await harness.engine({ fleet, helper: slow.helper, features: { jwt: true }, deployment: deploymentA, rpc: harness.rpc(undefined, undefined, undefined, time) });

    const provisioningByA = a.engine.provision(a.work(identity));
    await slow.entered;
    if (severStore) storeA.sever();
    time.jump(PAST_TAKEOVER_BOUND_MS);
    const bTermBeganAt = time.now();
    const deploymentB = await harness.elected({ site, deploymentId: "deployment-b", clock: time });
    slow.release();
    const outcomeA = await provisioningByA;

    expect(deploymentA.term).toBe(1);
    expect(deploymentB.term).toBe(2);
    expect(outcomeA).toMatchObject({ kind: "paused", identity, step: "configure" });
    expect(outcomeA.kind === "paused" && outcomeA.error).toBeInstanceOf(PausedError);
    expect(outcomeA.kind === "paused" && outcomeA.error.message).toMatch(pauseReason);
    // A request of A's term that reaches the node late is past its TTL there: dropped, never run.
    expect(recordsOf(fleet, identity).filter((entry) => entry.timeMs >= bTermBeganAt && entry.outcome !== "dropped")).toEqual([]);
    expect(executedBy(fleet, identity)).toEqual(["jwt:0", "inventory:0"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
    expect(fleet.node(identity).lockHolder).toBe(LOCK_KEY);

    const b = await harness.engine({
      fleet,
      helper: new ExecHelperRunner({ command: MJS_HELPER }),
      features: { jwt: true },
      deployment: deploymentB,
      rpc: harness.rpc(deploymentBConnection, undefined, undefined, time),
    });
    const outcomeB = await b.engine.provision(b.work(identity));
    await restarted(fleet, identity);

    expect(outcomeB).toEqual({ kind: "provisioned", identity, provisioningJwt: presentedJwt(fleet) });
    expect(executedBy(fleet, identity)).toEqual(["jwt:0", "inventory:0", "jwt:0", "inventory:0", "configure:0", "restart:0"]);
    expect(new Set(recordsOf(fleet, identity).map((entry) => entry.caller))).toEqual(new Set([LOCK_KEY]));
    expect(fleet.node(identity).configuredConfig?.identity).toBe(identity);
    expect(fleet.node(identity).inProvisioningMode).toBe(false);
  });

  it("work A admitted under its old term stays fenced off even after A wins the lease back", async () => {
    const identity = "fenced.example.net";
    const time = realClock();
    const fleet = await harness.fleet({ identities: [identity], clock: time });
    const site = harness.newSite();
    const deploymentA = await harness.elected({ site, deploymentId: "deployment-a", clock: time });
    const slow = slowLambdaHelper();
    const a = await harness.engine({ fleet, helper: slow.helper, features: { jwt: true }, deployment: deploymentA, rpc: harness.rpc(undefined, undefined, undefined, time) });

    const provisioningByA = a.engine.provision(a.work(identity));
    await slow.entered;
    time.jump(PAST_TAKEOVER_BOUND_MS);
    await harness.elected({ site, deploymentId: "deployment-b", clock: time });
    time.jump(PAST_TAKEOVER_BOUND_MS);
    const regained = await deploymentA.gate.acquireOrKeep();
    slow.release();
    const outcomeA = await provisioningByA;

    expect(regained).toMatchObject({ holding: true, term: 3 });
    expect(outcomeA).toMatchObject({ kind: "paused", identity, step: "configure" });
    expect(outcomeA.kind === "paused" && outcomeA.error).toBeInstanceOf(LeaseLostError);
    expect(executedBy(fleet, identity)).toEqual(["jwt:0", "inventory:0"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
  });
});
