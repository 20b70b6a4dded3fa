/**
 * The engine wired the way a deployment wires it, on real services: a real nats-server, the fleet
 * simulator, NatsChoriaRpc, a lease gate on DynamoDB Local and the real helper runners. Two test
 * adaptations, both through the engine's own ports: RPC waits are capped (a missing reply costs
 * milliseconds instead of the 22 s DDL timeout) and the engine clock's backoff sleeps are scaled
 * down. The gate still sees the planned per-attempt timeouts.
 */
import { generateKeyPairSync, randomUUID, sign } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { NatsConnection } from "nats";
import type { ProtocolVersion } from "../../../lib/choria/envelope";
import type { RequestSigner } from "../../../lib/choria/protocol";
import { NatsChoriaRpc } from "../../../lib/nats/rpc-client";
import { decodeHex, encodeHex } from "../../../lib/crypto/encoding";
import { ed25519PrivateKeyFromSeed, rawPublicKey, type SigningKey } from "../../../lib/crypto/keys";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { ProvisionEngine } from "../../../lib/engine/provision";
import type { EngineSettings } from "../../../lib/engine/settings";
import type { HelperInvoke } from "../../../lib/helper/lambda-runner";
import { engineSettings } from "../../support/engine-settings";
import { createLeaseTable } from "../../../dev/local/resources";
import { DynamoDbLeaseStore } from "../../../lib/dynamodb/lease-store";
import { createLeaseGate } from "../../../lib/lease/gate";
import type { LeaseGate } from "../../../lib/ports/lease-gate";
import type { LeaseStore } from "../../../lib/ports/lease-store";
import { resolveLeaseSettings } from "../../../lib/lease/settings";
import { LOCAL_AWS, type RunningNats } from "../../../dev/local/services";
import type { ChoriaRpc } from "../../../lib/ports/rpc";
import type { Clock } from "../../../lib/ports/clock";
import type { HelperRunner } from "../../../lib/ports/helper";
import type { HostWork } from "../../../lib/ports/host-work";
import type { Fleet, RpcRecord, SimulatedNode } from "../../../dev/simulator";
import { CappedWaitRpc, realClock, RecordingMetrics } from "../../support/fakes";
import { FleetHarness } from "../../support/fleet-harness";

/** The RPC client's default request TTL, v1 servers' minimum: how long a delayed request may still run. */
const DEFAULT_TTL_SECONDS = 30;

const TOKEN = "s3cret-provisioning-token";
const SENDER_ID = "provisioner.example.net";
const CALLER_ID = "choria=provisioner.mcollective";
/** The key a node's provisioning lock is held under (`<senderid>.<callerid>`). */
export const LOCK_KEY = `${SENDER_ID}.${CALLER_ID}`;
const CALLER_KEY = generateKeyPairSync("ed25519").privateKey;
const UPGRADES_REPOSITORY = "https://packages.example.net/choria";

/**
 * Per-attempt cap on waiting for a reply. Simulated nodes answer in milliseconds, except gencsr,
 * which generates an RSA key first; missing-reply tests pass a much smaller cap.
 */
const RPC_WAIT_CAP_MS = 10_000;
const BACKOFF_SCALE = 20;

const HELPERS_DIR = fileURLToPath(new URL("../../../examples/helpers/", import.meta.url));
export const MJS_HELPER = `node ${join(HELPERS_DIR, "provision-helper.mjs")}`;
export const SH_HELPER = join(HELPERS_DIR, "provision-helper.sh");

/** Wall and monotonic time are real; only the backoff between RPC attempts is shortened. */
const shortBackoffClock = realClock({ sleepDivisor: BACKOFF_SCALE });

/** Runs the example Lambda helper's handler in-process, as a synchronous Lambda invocation would. */
export function inProcessInvoke<Event>(handler: (event: Event) => Promise<unknown>): HelperInvoke {
  return async (payload) => {
    const event = JSON.parse(new TextDecoder().decode(payload)) as Event;
    const result = await handler(event);
    return { statusCode: 200, payload: new TextEncoder().encode(JSON.stringify(result)) };
  };
}

export interface Deployment {
  gate: LeaseGate;
  term: number;
  metrics: RecordingMetrics;
}

export interface EngineUnderTest {
  engine: ProvisionEngine;
  metrics: RecordingMetrics;
  settings: EngineSettings;
  work(identity: string): HostWork;
}

export interface EngineOptions {
  fleet: Fleet;
  helper: HelperRunner;
  features?: Partial<EngineSettings["features"]>;
  settings?: Partial<Omit<EngineSettings, "features">>;
  deployment?: Deployment;
  rpc?: ChoriaRpc;
  rpcWaitCapMs?: number;
}

/** One nats-server, one RPC connection and one lease table per test file. */
export class EngineHarness extends FleetHarness {
  private siteCount = 0;

  private constructor(
    nats: RunningNats,
    nc: NatsConnection,
    readonly dynamo: DynamoDBClient,
    readonly tableName: string,
    readonly store: DynamoDbLeaseStore,
  ) {
    // One RSA key per fleet: each test has its own fleet, and generating keys ahead is wasted here.
    super(nats, nc, { token: TOKEN, rsaKeys: { reuse: true, size: 1 } });
  }

  static async start(dynamoEndpoint: string): Promise<EngineHarness> {
    const { nats, nc } = await FleetHarness.broker();
    const dynamo = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamoEndpoint });
    const tableName = `engine-it-${randomUUID()}`;
    await createLeaseTable(dynamo, tableName);
    return new EngineHarness(nats, nc, dynamo, tableName, new DynamoDbLeaseStore({ client: dynamo, tableName }));
  }

  override async stop(): Promise<void> {
    await super.stop();
    this.dynamo.destroy();
  }

  /** A fresh site on the shared table, so every test starts from term 1. */
  newSite(): string {
    return `site-${++this.siteCount}-${randomUUID()}`;
  }

  /**
   * A deployment that has won the lease of `site` (a new one by default) through the real gate,
   * with the request TTL as its delivery horizon, as production composes it.
   */
  async elected(options: { site?: string; deploymentId?: string; clock?: Clock; store?: LeaseStore } = {}): Promise<Deployment> {
    const metrics = new RecordingMetrics();
    const settings = resolveLeaseSettings({
      leaderElection: true,
      site: options.site ?? this.newSite(),
      deploymentId: options.deploymentId ?? "deployment-a",
      deliveryHorizonMs: DEFAULT_TTL_SECONDS * 1_000,
    });
    const gate = createLeaseGate(settings, { store: options.store ?? this.store, metrics, clock: options.clock });
    const outcome = await gate.acquireOrKeep();
    if (!outcome.holding) throw new Error(`${settings.deploymentId} did not win the lease of ${settings.site}`);
    return { gate, term: outcome.term, metrics };
  }

  /** `clock`: what the envelope time is read from (a test whose nodes share a jumping clock passes it). */
  rpc(nc: NatsConnection = this.nc, capMs = RPC_WAIT_CAP_MS, protocolVersion: ProtocolVersion = 1, clock?: Clock): ChoriaRpc {
    const signer: RequestSigner =
      protocolVersion === 1
        ? { version: 1, kind: "insecure" }
        : { version: 2, callerJwt: "provisioner.caller.jwt", sign: (bytes) => new Uint8Array(sign(null, bytes, CALLER_KEY)) };
    return new CappedWaitRpc(new NatsChoriaRpc(nc, { senderId: SENDER_ID, callerId: CALLER_ID, protocolVersion, signer, ...(clock ? { clock } : {}) }), capMs);
  }

  async engine(options: EngineOptions): Promise<EngineUnderTest> {
    const deployment = options.deployment ?? (await this.elected());
    const metrics = new RecordingMetrics();
    const settings = engineSettings(TOKEN, {
      features: options.features,
      upgradesRepository: UPGRADES_REPOSITORY,
      jwtVerifier: { kind: "ed25519", publicKey: options.fleet.signer.publicKey },
      ...options.settings,
    });
    const engine = new ProvisionEngine({
      settings,
      rpc: options.rpc ?? this.rpc(this.nc, options.rpcWaitCapMs),
      gate: deployment.gate,
      helper: options.helper,
      metrics,
      clock: shortBackoffClock,
      random: () => 0.5,
    });
    const work = (identity: string): HostWork => ({ identity, term: deployment.term, admittedAt: Date.now(), source: "discovery" });
    return { engine, metrics, settings, work };
  }

  /** A helper that reads the host JSON and answers with `response`, as a site's own helper would. */
  async respondingHelper(name: string, response: object): Promise<string> {
    const responseFile = await this.scratchFile(`${name}.json`, JSON.stringify(response));
    const script = await this.helperScript(
      "respond-from-file.mjs",
      'import { readFileSync } from "node:fs";\nfor await (const _ of process.stdin);\nprocess.stdout.write(readFileSync(process.argv[2]));',
    );
    return `${script} ${responseFile}`;
  }
}

export type Ed25519SigningKey = Extract<SigningKey, { alg: "EdDSA" }>;

/** A fresh Ed25519 key (`jwt_signing_key`, or an org issuer). */
export function newSigningKey(): Ed25519SigningKey {
  return ed25519SigningKey(generateEd25519Seed()) as Ed25519SigningKey;
}

/** Hex public key of the seed the node wrote on gen25519 (empty when it has none). */
export function nodePublicKeyHex(node: SimulatedNode): string {
  const seedHex = node.files.serverSeedHex;
  return seedHex === undefined ? "" : encodeHex(rawPublicKey(ed25519PrivateKeyFromSeed(decodeHex(seedHex))));
}

/** What one node ran (not what it dropped, e.g. past its TTL), as `action:outcome`, in arrival order. */
export function executedBy(fleet: Fleet, identity: string): string[] {
  return recordsOf(fleet, identity)
    .filter((entry) => entry.outcome !== "dropped")
    .map((entry) => `${entry.action}:${entry.outcome}`);
}

/** What one node was asked, as `action:outcome`, in arrival order. */
export function requestsTo(fleet: Fleet, identity: string): string[] {
  return fleet.record.filter((entry) => entry.identity === identity).map((entry) => `${entry.action}:${entry.outcome}`);
}

export function recordsOf(fleet: Fleet, identity: string): RpcRecord[] {
  return fleet.record.filter((entry) => entry.identity === identity);
}

/** Waits until a node that was told to restart is back (or gone from provisioning mode). */
export async function restarted(fleet: Fleet, identity: string, times = 1): Promise<void> {
  await fleet.waitFor(() => fleet.node(identity).restarts >= times, 5_000);
}
