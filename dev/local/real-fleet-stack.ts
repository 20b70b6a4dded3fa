/**
 * A real go-choria fleet (real-fleet.ts) wired to the local stack (real handlers, lease, queues,
 * bridge) over TLS, for the real-fleet suite and `npm run realfleet`, and what they observe at the
 * nodes: their files and logs, and their lifecycle events on both brokers. The helper is
 * examples/helpers/real-fleet-helper.sh: it sends nodes to the target broker with a configuration a
 * real server can run with.
 */
import { writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { connect, type NatsConnection } from "nats";
import { parseLifecycleEvent } from "../../lib/choria/lifecycle";
import { decodeHex, ed25519PublicKeyFromRaw, encodeHex, generateEd25519Seed, ed25519SigningKey, verifyJwtSignature } from "../../lib/crypto";
import { startRealFleet, type RealFleet, type RealNode, type TlsBroker } from "./real-fleet";
import { startLocalStack, type FeatureName, type LocalStack, type LocalStackOptions } from "./stack";

export const REAL_FLEET_HELPER = resolve(fileURLToPath(new URL("../..", import.meta.url)), "examples/helpers/real-fleet-helper.sh");

export interface LifecycleRecord {
  type: string;
  identity: string;
  component: string;
  at: number;
}

/** Every lifecycle event published on a broker, in arrival order. */
export class LifecycleWatch {
  readonly events: LifecycleRecord[] = [];
  private constructor(private readonly nc: NatsConnection) {}

  static async on(broker: TlsBroker, caPem: string): Promise<LifecycleWatch> {
    const nc = await connect({ servers: broker.url, tls: { ca: caPem }, name: "real-fleet-watch" });
    const watch = new LifecycleWatch(nc);
    const subscription = nc.subscribe("choria.lifecycle.event.>");
    void (async () => {
      for await (const message of subscription) {
        const [, , , type = "", component = ""] = message.subject.split(".");
        // Our own parser reads what the real nodes send (they publish CloudEvents).
        let identity = "";
        try {
          identity = parseLifecycleEvent(message.data).identity;
        } catch (error) {
          identity = `unparsable: ${String(error)}`;
        }
        watch.events.push({ type, identity, component, at: Date.now() });
      }
    })();
    await nc.flush();
    return watch;
  }

  of(type: string, component?: string): LifecycleRecord[] {
    return this.events.filter((event) => event.type === type && (component === undefined || event.component === component));
  }

  identities(type: string, component?: string): Set<string> {
    return new Set(this.of(type, component).map((event) => event.identity));
  }

  close(): Promise<void> {
    return this.nc.close();
  }
}

export interface ProvisionedFleet {
  fleet: RealFleet;
  stack: LocalStack;
  /** Events on the provisioning broker (nodes in provisioning mode) and on the target broker. */
  provisioningEvents: LifecycleWatch;
  targetEvents: LifecycleWatch;
  /** The server JWT signer's public key (hex): what nodes are told to trust. */
  serverJwtSigner: string;
  stop(): Promise<void>;
}

export interface ProvisionedFleetOptions {
  identities: string[];
  protocolV2: boolean;
  features: FeatureName[];
  /** An already running DynamoDB (the test run's); default: the stack starts DynamoDB Local. */
  dynamoDbEndpoint?: string;
  deployments?: string[];
  /** JSON the helper returns as server_claims. */
  serverClaims?: object;
  stack?: Partial<LocalStackOptions>;
}

/** Starts the real fleet and a local stack pointed at its TLS provisioning broker (not yet started). */
export async function provisionedFleet(options: ProvisionedFleetOptions): Promise<ProvisionedFleet> {
  const fleet = await startRealFleet({ identities: options.identities, protocolV2: options.protocolV2, start: false });
  const stops: Array<() => Promise<unknown>> = [() => fleet.stop()];
  const stop = async () => {
    for (const step of stops.reverse()) await step().catch(() => undefined);
    stops.length = 0;
  };
  try {
    const signingSeed = generateEd25519Seed();
    const signingKey = ed25519SigningKey(signingSeed);
    const serverJwtSigner = signingKey.alg === "EdDSA" ? signingKey.publicKeyHex : "";
    const signingKeyFile = join(fleet.dir, "server-jwt-signer.seed");
    await writeFile(signingKeyFile, encodeHex(signingSeed), { mode: 0o600 });
    const client = options.protocolV2 ? await fleet.clientCredentials("provisioner") : undefined;

    const helperEnv: Record<string, string> = {
      REALFLEET_TARGET_BROKER: fleet.targetBroker.hostPort,
      REALFLEET_TRUSTED_SIGNERS: serverJwtSigner,
      REALFLEET_CA_CERT: fleet.ca.certFile,
      REALFLEET_CA_KEY: fleet.ca.keyFile,
      ...(options.serverClaims ? { REALFLEET_SERVER_CLAIMS: JSON.stringify(options.serverClaims) } : {}),
    };
    const helperCommand = ["env", ...Object.entries(helperEnv).map(([key, value]) => shellQuote(`${key}=${value}`)), REAL_FLEET_HELPER].join(" ");

    const [provisioningEvents, targetEvents] = await Promise.all([
      LifecycleWatch.on(fleet.provisioningBroker, fleet.ca.certPem),
      LifecycleWatch.on(fleet.targetBroker, fleet.ca.certPem),
    ]);
    stops.push(() => provisioningEvents.close(), () => targetEvents.close());

    const stack = await startLocalStack({
      nodes: 0,
      fast: true,
      features: options.features,
      helper: { command: helperCommand },
      deployments: options.deployments ?? ["primary"],
      ...(options.dynamoDbEndpoint ? { dynamoDbEndpoint: options.dynamoDbEndpoint } : {}),
      waitTimeSeconds: 1,
      nats: fleet.provisioningBroker.nats,
      natsCaFile: fleet.ca.certFile,
      config: () => ({
        token: fleet.token,
        jwt_verify_cert: fleet.signer.publicKeyFile,
        jwt_signing_key: signingKeyFile,
        ...(client ? { protocol_version: 2, client_jwt: client.jwt, client_seed: client.seedHex } : {}),
      }),
      ...options.stack,
    });
    stops.push(() => stack.stop());
    return { fleet, stack, provisioningEvents, targetEvents, serverJwtSigner, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Polls until `predicate` holds; the failure names what was still missing. */
export async function waitUntil(what: () => string | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = what();
    if (missing === undefined) return;
    if (Date.now() > deadline) throw new Error(`not reached within ${timeoutMs} ms: ${missing}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Waits until every identity published a startup event on the target broker. */
export function waitForArrivals(provisioned: ProvisionedFleet, identities: string[], timeoutMs: number): Promise<void> {
  return waitUntil(() => {
    const arrived = provisioned.targetEvents.identities("startup");
    const missing = identities.filter((identity) => !arrived.has(identity));
    return missing.length === 0 ? undefined : `no startup event on the target broker from ${missing.join(", ")}`;
  }, timeoutMs);
}

/** How often the node's provisioning agent rewrote its configuration and restarted (from its log). */
export async function provisioningActions(node: RealNode): Promise<{ configured: number; restarted: number }> {
  const log = await node.log();
  return {
    configured: log.match(/Rewriting configuration file /g)?.length ?? 0,
    restarted: log.match(/Restarting server via request /g)?.length ?? 0,
  };
}

export function verifyServerJwt(token: string, signerHex: string): Record<string, unknown> {
  return verifyJwtSignature(token.trim(), ed25519PublicKeyFromRaw(decodeHex(signerHex)));
}

function shellQuote(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
