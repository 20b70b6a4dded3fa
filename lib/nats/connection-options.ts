/** What the provisioner's settings make of a NATS connection: servers, TLS, the provisioner user or client JWT, the signed nonce. */
import type { ConnectionOptions } from "nats";
import { BrokerConnectionError } from "../errors";

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

function splitServers(servers: string | string[]): string[] {
  const list = (Array.isArray(servers) ? servers : servers.split(",")).map((server) => server.trim()).filter(Boolean);
  return list;
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
