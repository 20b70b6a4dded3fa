/**
 * The provisioner's broker connection (docs/protocol.md §10) and the one piece of traffic it sends on
 * its own behalf: its startup lifecycle event (§8).
 *
 * Lambda keeps module state between warm invocations, so SharedBrokerConnection holds one
 * connection per container and checks it before each use: a connection that was closed, or that
 * cannot round-trip a PING within a short bound (frozen container, broker restart), is replaced.
 * Passwords and tokens are handed to nats.js only; they never appear in errors or logs.
 */
import { connect, type ConnectionOptions, type NatsConnection } from "nats";
import { ProvisionerError } from "../errors";
import { type Clock, systemClock } from "../ports/clock";
import { buildLifecycleEvent, encodeLifecycleEvent, lifecycleSubject } from "../choria/lifecycle";

/** The NATS user the broker maps to the provisioning account when the password matches. */
const PROVISIONER_USER = "provisioner";

interface BrokerTlsSettings {
  /** PEM text of the CA bundle that signed the broker's certificate. */
  ca?: string;
  /** PEM client certificate and key for mTLS (x509 networks). */
  cert?: string;
  key?: string;
  insecureSkipVerify?: boolean;
}

export interface BrokerConnectionSettings {
  /** `nats://host:port` URLs (or one comma-separated string, as `broker` config values are). */
  servers: string | string[];
  /** `broker_provisioning_password`: when set the connection authenticates as user `provisioner`. */
  provisioningPassword?: string;
  /** NATS auth token: the provisioner's client JWT in Organization Issuer networks. */
  token?: string;
  /**
   * Signs the connection nonce the broker sends with the key of the client JWT given as `token`:
   * a go-choria broker admits a client JWT only with that signature (as go-choria's own clients
   * send it), so without it a protocol v2 client is refused wherever its JWT is checked.
   */
  signNonce?: (nonce: Uint8Array) => Uint8Array;
  tls?: BrokerTlsSettings;
  /** `choria_insecure`: plain TCP; otherwise TLS is required. */
  insecure: boolean;
  /** Connection name shown by the broker (monitoring, `nats server report connections`). */
  name: string;
  /** Bound on establishing the connection; default 5000 ms. */
  connectTimeoutMs?: number;
}

/** The broker refused or could not be reached. The message names servers, never credentials. */
export class BrokerConnectionError extends ProvisionerError {}

function splitServers(servers: string | string[]): string[] {
  const list = (Array.isArray(servers) ? servers : servers.split(",")).map((server) => server.trim()).filter(Boolean);
  return list;
}

export function connectionOptions(settings: BrokerConnectionSettings): ConnectionOptions {
  const servers = splitServers(settings.servers);
  if (servers.length === 0) throw new BrokerConnectionError("no broker servers configured");
  const options: ConnectionOptions = {
    servers,
    name: settings.name,
    timeout: settings.connectTimeoutMs ?? 5_000,
    // Lambda invocations are short; the shared wrapper reconnects explicitly instead of buffering
    // publishes into a connection that keeps retrying in the background of a frozen container.
    maxReconnectAttempts: 10,
    reconnectTimeWait: 250,
    // null: never upgrade to TLS, even if offered. An object (possibly empty) demands TLS.
    tls: settings.insecure ? null : tlsOptions(settings.tls),
  };
  if (settings.provisioningPassword !== undefined) {
    options.user = PROVISIONER_USER;
    options.pass = settings.provisioningPassword;
  }
  if (settings.token !== undefined) options.token = settings.token;
  const { signNonce, token } = settings;
  // As go-choria's client (nats.Token plus nats.UserJWT): the JWT as token and as jwt, the nonce
  // signed; nats.js merges this with the token and user authenticators into one CONNECT.
  if (signNonce && token !== undefined) {
    options.authenticator = (nonce?: string) => ({ jwt: token, ...(nonce ? { sig: Buffer.from(signNonce(new TextEncoder().encode(nonce))).toString("base64url") } : {}) });
  }
  return options;
}

function tlsOptions(tls: BrokerTlsSettings | undefined): NonNullable<ConnectionOptions["tls"]> {
  const options: Record<string, unknown> = {};
  if (tls?.ca) options.ca = tls.ca;
  if (tls?.cert) options.cert = tls.cert;
  if (tls?.key) options.key = tls.key;
  // Passed through to node:tls by the nats.js transport.
  if (tls?.insecureSkipVerify) options.rejectUnauthorized = false;
  return options;
}

/** NATS errors can echo server text; only the code and a generic description are kept. */
function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : "connection failed";
}

export async function connectBroker(settings: BrokerConnectionSettings): Promise<NatsConnection> {
  const options = connectionOptions(settings);
  try {
    return await connect(options);
  } catch (error) {
    throw new BrokerConnectionError(`could not connect to ${(options.servers as string[]).join(",")}: ${describe(error)}`, {
      cause: error,
    });
  }
}

export interface SharedBrokerConnectionOptions {
  /** How long a health-check flush may take before the connection counts as dead; default 1000 ms. */
  healthCheckTimeoutMs?: number;
  /** Replaceable for tests; defaults to connectBroker. */
  connector?: (settings: BrokerConnectionSettings) => Promise<NatsConnection>;
}

/**
 * One broker connection per Lambda container. `get()` returns a connection that answered a PING
 * just now; concurrent callers share one connect attempt.
 */
export class SharedBrokerConnection {
  private current: NatsConnection | undefined;
  private pending: Promise<NatsConnection> | undefined;
  private readonly healthCheckTimeoutMs: number;
  private readonly connector: (settings: BrokerConnectionSettings) => Promise<NatsConnection>;

  constructor(
    private readonly settings: BrokerConnectionSettings,
    options: SharedBrokerConnectionOptions = {},
  ) {
    this.healthCheckTimeoutMs = options.healthCheckTimeoutMs ?? 1_000;
    this.connector = options.connector ?? connectBroker;
  }

  async get(): Promise<NatsConnection> {
    this.pending ??= this.obtain().finally(() => (this.pending = undefined));
    return this.pending;
  }

  /** Closes the held connection (container shutdown, tests). */
  async close(): Promise<void> {
    const connection = this.current;
    this.current = undefined;
    if (connection && !connection.isClosed()) await connection.close();
  }

  private async obtain(): Promise<NatsConnection> {
    const existing = this.current;
    if (existing && (await this.healthy(existing))) return existing;
    this.current = undefined;
    if (existing && !existing.isClosed()) {
      await existing.close().catch(() => undefined);
    }
    this.current = await this.connector(this.settings);
    return this.current;
  }

  private async healthy(connection: NatsConnection): Promise<boolean> {
    if (connection.isClosed()) return false;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.healthCheckTimeoutMs)));
    try {
      return await Promise.race([connection.flush().then(() => true, () => false), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }
}

export interface StartupEventInput {
  identity: string;
  version: string;
  timestampMs?: number;
  clock?: Clock;
}

/** The provisioner's own startup event, Choria format, component `provisioner` (as Go sends it). */
export async function publishStartupEvent(nc: NatsConnection, input: StartupEventInput): Promise<void> {
  const event = buildLifecycleEvent({
    type: "startup",
    identity: input.identity,
    component: "provisioner",
    version: input.version,
    timestampMs: input.timestampMs ?? (input.clock ?? systemClock).now(),
  });
  nc.publish(lifecycleSubject("startup", "provisioner"), encodeLifecycleEvent(event, "choria"));
  await nc.flush();
}
