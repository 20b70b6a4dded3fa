/**
 * A real go-choria fleet (real-fleet.ts) wired to the local stack (real handlers, lease, queues,
 * bridge) over TLS, for the real-fleet suite and `npm run realfleet`, and what they observe at the
 * nodes: their files and logs, and their lifecycle events on both brokers. The helper is
 * examples/helpers/real-fleet-helper.sh (or, with `helper: "example"`, the example helper
 * examples/helpers/provision-helper.mjs): it sends nodes to the target broker with a configuration a
 * real server can run with.
 *
 * The stack connects to the provisioning broker as a production site's provisioner does: user
 * `provisioner` with `broker_provisioning_password` given as a Secrets Manager reference (resolved
 * by the stack's secret resolver), over TLS with the CA and a client certificate the CA signed.
 *
 * Lifecycle events: the brokers run with Choria Streams on, as production brokers do
 * (real-fleet-broker.ts). go-choria enables JetStream in its `choria` account only; the
 * `provisioning` account, where user `provisioner` always lands (choria_auth.go), has none, but it
 * exports `choria.lifecycle.>` to the choria account, where the broker's own CHORIA_EVENTS stream
 * keeps the provisioning-mode startup events (docs/lifecycle.md). So the stack's configuration
 * sets `lifecycle_broker_urls` to the same broker, as a production site does: each deployment's
 * ticks read on a second connection of their own, into the choria account (mTLS with the
 * CA-signed provisioner certificate and no user: go-choria's default account), find CHORIA_EVENTS
 * by its subject and pull through the site's durable consumer: the bridge runs in mode
 * "jetstream". The stack makes no stream of its own (`lifecycleStream: false`).
 */
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readFile, writeFile } from "node:fs/promises";
import { connect, type ConnectionOptions, type NatsConnection } from "nats";
import type { SecretResolver } from "../../lib/config/secrets";
import type { LogAttributes, Logger } from "../../lib/ports/logger";
import { parseLifecycleEvent } from "../../lib/choria/lifecycle";
import { decodeHex } from "../../lib/crypto/encoding";
import { ed25519PublicKeyFromRaw } from "../../lib/crypto/keys";
import { verifyJwtSignature } from "../../test/support/choria-node/jwt-signature";
import { startRealFleet, type ClientCredentialOptions, type RealFleet, type RealNode, type TlsBroker } from "./real-fleet";
import { startLocalStack, type FeatureName, type LocalStack, type LocalStackOptions } from "./stack";

const REPO_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));
const REAL_FLEET_HELPER = resolve(REPO_ROOT, "examples/helpers/real-fleet-helper.sh");
const EXAMPLE_HELPER = resolve(REPO_ROOT, "examples/helpers/provision-helper.mjs");

/** Where the stack's configuration says the broker password is; the stack's resolver answers it. */
const BROKER_PASSWORD_REFERENCE = "secretsmanager:realfleet/provisioning-broker-password";

/** How a client authenticates to one of the fleet's brokers (the watches, the negative tests). */
export interface BrokerCredentials {
  /** A certificate the CA signed (mTLS); without it the connection is unverified TLS. */
  certificate?: { certFile: string; keyFile: string };
  user?: string;
  pass?: string;
  token?: string;
}

/** nats.js options for `broker` with `credentials`, verifying the broker against `caPem`. */
export async function brokerConnectOptions(broker: TlsBroker, caPem: string, credentials: BrokerCredentials, name: string): Promise<ConnectionOptions> {
  const certificate = credentials.certificate;
  const tls = certificate
    ? { ca: caPem, cert: await readFile(certificate.certFile, "utf8"), key: await readFile(certificate.keyFile, "utf8") }
    : { ca: caPem };
  return {
    servers: broker.url,
    tls,
    name,
    ...(credentials.user !== undefined ? { user: credentials.user, pass: credentials.pass ?? "" } : {}),
    ...(credentials.token !== undefined ? { token: credentials.token } : {}),
    // A refused connection is the answer, not something to retry.
    reconnect: false,
  };
}

/** The provisioner's view of the provisioning broker: user `provisioner`, the password, the CA-signed certificate. */
export function provisionerCredentials(fleet: RealFleet): BrokerCredentials {
  return { certificate: fleet.provisionerCertificate, user: "provisioner", pass: fleet.provisioningPassword };
}

/**
 * Where the stack's lifecycle event sources read: the provisioning broker's choria account (mTLS,
 * no user), whose Choria Streams keep the lifecycle events. Tests read the stream and the site's
 * consumer there too.
 */
export function lifecycleReaderCredentials(fleet: RealFleet): BrokerCredentials {
  return { certificate: fleet.provisionerCertificate };
}

interface LogRecord {
  level: "debug" | "info" | "warn" | "error";
  message: string;
  attributes: LogAttributes | undefined;
  /** When it was logged (epoch ms). */
  at: number;
}

/** Keeps what the stack's functions log (info and above), so tests read their log lines. */
class RecordingLogger implements Logger {
  readonly records: LogRecord[] = [];
  private readonly triggers: Array<{ message: string; action: (record: LogRecord) => void }> = [];
  debug(): void {}
  info(message: string, attributes?: LogAttributes): void {
    this.record({ level: "info", message, attributes, at: Date.now() });
  }
  warn(message: string, attributes?: LogAttributes): void {
    this.record({ level: "warn", message, attributes, at: Date.now() });
  }
  error(message: string, attributes?: LogAttributes): void {
    this.record({ level: "error", message, attributes, at: Date.now() });
  }
  of(message: string): LogRecord[] {
    return this.records.filter((record) => record.message === message);
  }
  /**
   * Runs `action` the first time `message` is logged, before the logging code goes on: a fault
   * injected at an exact point of the sequence (e.g. a crash between two RPCs).
   */
  onFirst(message: string, action: (record: LogRecord) => void): void {
    this.triggers.push({ message, action });
  }
  private record(record: LogRecord): void {
    this.records.push(record);
    const index = this.triggers.findIndex((trigger) => trigger.message === record.message);
    if (index >= 0) this.triggers.splice(index, 1)[0]!.action(record);
  }
}

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

  static async on(broker: TlsBroker, caPem: string, credentials: BrokerCredentials): Promise<LifecycleWatch> {
    const nc = await connect(await brokerConnectOptions(broker, caPem, credentials, "real-fleet-watch"));
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
  /** What the stack's functions logged. */
  logs: RecordingLogger;
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
  /** `realfleet` (default): examples/helpers/real-fleet-helper.sh; `example`: the example helper with its PROVISION_HELPER_* settings. */
  helper?: "realfleet" | "example";
  /** Passed on to startRealFleet. */
  targetCertificateFromOtherCa?: boolean;
  /** What the stack's secret resolver answers for BROKER_PASSWORD_REFERENCE; default the broker's password. */
  brokerPassword?: string;
  /** More provisioner configuration keys, over the ones this sets (e.g. `renew`, which names the fleet's target broker). */
  config?: (fleet: RealFleet) => Promise<Record<string, unknown>> | Record<string, unknown>;
  /** Passed on to startRealFleet. */
  policies?: Record<string, string>;
  /** How the v2 provisioner's client JWT is made (fleet.clientCredentials). */
  clientCredentials?: ClientCredentialOptions;
  /** The helper signs certificates valid this many seconds instead of 2 days (REALFLEET_CERT_VALIDITY_SECONDS). */
  certificateValiditySeconds?: number;
}

/** Starts the real fleet and a local stack pointed at its provisioning broker (not yet started). */
export async function provisionedFleet(options: ProvisionedFleetOptions): Promise<ProvisionedFleet> {
  const fleet = await startRealFleet({
    identities: options.identities,
    protocolV2: options.protocolV2,
    start: false,
    ...(options.targetCertificateFromOtherCa ? { targetCertificateFromOtherCa: true } : {}),
    ...(options.policies ? { policies: options.policies } : {}),
  });
  const stops: Array<() => Promise<unknown>> = [() => fleet.stop()];
  const stop = async () => {
    for (const step of stops.reverse()) await step().catch(() => undefined);
    stops.length = 0;
  };
  try {
    const serverJwtSigner = fleet.siteSigner.publicKeyHex;
    const client = options.protocolV2 ? await fleet.clientCredentials("provisioner", options.clientCredentials) : undefined;

    const helperCommand = realFleetHelperCommand(fleet, options.helper ?? "realfleet", options.serverClaims, options.certificateValiditySeconds);

    const [provisioningEvents, targetEvents] = await Promise.all([
      LifecycleWatch.on(fleet.provisioningBroker, fleet.ca.certPem, provisionerCredentials(fleet)),
      LifecycleWatch.on(fleet.targetBroker, fleet.targetCa.certPem, { certificate: fleet.targetObserverCertificate }),
    ]);
    stops.push(() => provisioningEvents.close(), () => targetEvents.close());

    const password = options.brokerPassword ?? fleet.provisioningPassword;
    const secrets: SecretResolver = {
      resolve: async (reference) => {
        if (`${reference.store}:${reference.name}` === BROKER_PASSWORD_REFERENCE) return password;
        throw new Error(`the real-fleet secret store holds no ${reference.store}:${reference.name}`);
      },
    };
    const extraConfig = (await options.config?.(fleet)) ?? {};
    const logs = new RecordingLogger();
    const stack = await startLocalStack({
      nodes: 0,
      fast: true,
      features: options.features,
      helper: { command: helperCommand },
      deployments: options.deployments ?? ["primary"],
      ...(options.dynamoDbEndpoint ? { dynamoDbEndpoint: options.dynamoDbEndpoint } : {}),
      waitTimeSeconds: 1,
      nats: fleet.provisioningBroker.nats,
      lifecycleStream: false,
      logger: logs,
      overrides: () => ({ secrets }),
      config: () => ({
        choria_insecure: false,
        tls: { ca: fleet.ca.certFile, cert: fleet.provisionerCertificate.certFile, key: fleet.provisionerCertificate.keyFile },
        broker_provisioning_password: BROKER_PASSWORD_REFERENCE,
        // The same broker, in the choria account: the only one with Choria Streams.
        lifecycle_broker_urls: [fleet.provisioningBroker.url],
        token: fleet.token,
        jwt_verify_cert: fleet.signer.publicKeyFile,
        jwt_signing_key: fleet.siteSigner.seedFile,
        ...(client ? { protocol_version: 2, client_jwt: client.jwt, client_seed: client.seedHex } : {}),
        ...extraConfig,
      }),
      ...options.stack,
    });
    stops.push(() => stack.stop());
    return { fleet, stack, provisioningEvents, targetEvents, serverJwtSigner, logs, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The shell command that runs the chosen helper with the fleet's settings in its environment. */
function realFleetHelperCommand(fleet: RealFleet, helper: "realfleet" | "example", serverClaims?: object, certificateValiditySeconds?: number): string {
  const helperEnv: Record<string, string> =
    helper === "example"
      ? {
          PROVISION_HELPER_BROKERS: fleet.targetBroker.hostPort,
          PROVISION_HELPER_TRUSTED_SIGNERS: fleet.siteSigner.publicKeyHex,
          PROVISION_HELPER_CA: fleet.ca.certFile,
        }
      : {
          REALFLEET_TARGET_BROKER: fleet.targetBroker.hostPort,
          REALFLEET_TRUSTED_SIGNERS: fleet.siteSigner.publicKeyHex,
          REALFLEET_CA_CERT: fleet.ca.certFile,
          REALFLEET_CA_KEY: fleet.ca.keyFile,
          ...(serverClaims ? { REALFLEET_SERVER_CLAIMS: JSON.stringify(serverClaims) } : {}),
          ...(certificateValiditySeconds === undefined ? {} : { REALFLEET_CERT_VALIDITY_SECONDS: String(certificateValiditySeconds) }),
        };
  const helperPath = helper === "example" ? `node ${EXAMPLE_HELPER}` : REAL_FLEET_HELPER;
  return ["env", ...Object.entries(helperEnv).map(([key, value]) => shellQuote(`${key}=${value}`)), helperPath].join(" ");
}

export interface GoProvisionerFiles {
  /** provisioner.yaml (`--config`). */
  configFile: string;
  /** The Choria client configuration (`--choria-config`). */
  choriaConfigFile: string;
  /** Environment for the process: its certificate name. */
  env: Record<string, string>;
}

/**
 * Configuration for the Go Choria Provisioner (scripts/peers/build-provisioner.sh) against this real
 * fleet, the same way the stack connects: user `provisioner` with the broker password (the Go
 * daemon reads it from its file, mode 600) and the CA-signed certificate, on the provisioning
 * broker; the same helper, token, JWT keys and features. Protocol v1 fleets only: the Go daemon's
 * v2 client needs a `choria` security provider configuration this does not write.
 */
export async function goProvisionerFiles(fleet: RealFleet, options: { features: FeatureName[]; workers?: number; dir: string }): Promise<GoProvisionerFiles> {
  if (fleet.protocolV2) throw new Error("goProvisionerFiles: only protocol v1 fleets are wired for the Go provisioner");
  const certname = "provisioner.realfleet.example.net";
  const choriaConfigFile = join(options.dir, "choria-client.conf");
  const configFile = join(options.dir, "provisioner.yaml");
  await writeFile(
    choriaConfigFile,
    [
      "loglevel = info",
      "plugin.choria.use_srv = false",
      `plugin.choria.middleware_hosts = ${fleet.provisioningBroker.hostPort}`,
      "plugin.security.provider = file",
      `plugin.security.file.certificate = ${fleet.provisionerCertificate.certFile}`,
      `plugin.security.file.key = ${fleet.provisionerCertificate.keyFile}`,
      `plugin.security.file.ca = ${fleet.ca.certFile}`,
      "",
    ].join("\n"),
  );
  const features = new Set(options.features);
  const config = {
    workers: options.workers ?? 4,
    interval: "1m",
    logfile: join(options.dir, "provisioner.log"),
    loglevel: "info",
    helper: realFleetHelperCommand(fleet, "realfleet"),
    token: fleet.token,
    site: "realfleet",
    broker_provisioning_password: fleet.provisioningPassword,
    jwt_verify_cert: fleet.signer.publicKeyFile,
    jwt_signing_key: fleet.siteSigner.seedFile,
    leader_election: false,
    features: { jwt: features.has("jwt") || features.has("ed25519"), pki: features.has("pki"), ed25519: features.has("ed25519") },
  };
  await writeFile(configFile, JSON.stringify(config, null, 2), { mode: 0o600 });
  return { configFile, choriaConfigFile, env: { MCOLLECTIVE_CERTNAME: certname } };
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
