/**
 * go-choria's own broker (`choria broker run`, the pinned build of scripts/peers/build-choria.sh)
 * for the real fleet, configured as a production site runs it:
 *
 * - TLS on the client port with the fleet's test CA (file security provider). A client that shows a
 *   certificate the CA signed is verified (mTLS); one that shows none is "unverified" and must
 *   authenticate with a JWT, or it is refused.
 * - `provisioning`: the provisioning account is on (`plugin.choria.network.provisioning.client_password`)
 *   and the key that signs provisioning JWTs is trusted (`...provisioning.signer_cert`). Unverified
 *   connections with a provisioning JWT land in that account with the node permissions the broker
 *   sets; user `provisioner` with the password and a verified certificate lands there unrestricted.
 * - `jwtSigners`: ed25519 keys trusted to sign server and client JWTs (`server_signer_cert`,
 *   `client_signer_cert`), so protocol v2 nodes and clients connect without certificates.
 * - Choria Streams (JetStream) on, as on a production broker: `plugin.choria.network.stream.store`
 *   (a directory in `dir`). go-choria (broker/network/network_jetstream.go) then enables JetStream
 *   for the `choria` account only, never for `provisioning`, and creates its system streams there,
 *   among them CHORIA_EVENTS (`choria.lifecycle.>`, `stream.event_retention`, default 24 h). The
 *   provisioning account exports `choria.lifecycle.>` to the choria account
 *   (network_accounts.go), so the startup events of nodes in provisioning mode land in
 *   CHORIA_EVENTS too. The replica counts are set to 1: left at their default (-1, "the peer
 *   count") the broker waits a random 10-70 s before it creates the streams. `waitForReady` waits
 *   for the last of them (KV_CHORIA_LEADER_ELECTION), so a started broker has its streams.
 *
 * Every connection the broker refuses is logged with its reason (the authentication component's
 * `Denying connection` / `Handling provisioning user connection failed` lines), in `logFile`.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdir, open, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort, type RunningNats } from "./services";

const run = promisify(execFile);

/** A go-choria build: the binary and the facts compiled into it (real-fleet.ts `choriaBuild` finds it). */
export interface ChoriaBuild {
  binary: string;
  version: string;
  /** The provisioning JWT path compiled into the binary. */
  provisionJwtFile: string;
}

/** A NATS server with TLS, as the real fleet's nodes and the provisioner reach it. */
export interface TlsBroker {
  nats: RunningNats;
  url: string;
  /** host:port, the form go-choria's middleware_hosts takes. */
  hostPort: string;
}

export interface CertificateAuthority {
  certFile: string;
  keyFile: string;
  certPem: string;
}

/** A throwaway CA (openssl, P-256) in `dir`. */
export async function makeCertificateAuthority(dir: string): Promise<CertificateAuthority> {
  await mkdir(dir, { recursive: true });
  const certFile = join(dir, "ca.pem");
  const keyFile = join(dir, "ca.key");
  await run("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", keyFile, "-out", certFile, "-days", "2", "-subj", "/CN=real-fleet test CA",
  ]);
  return { certFile, keyFile, certPem: await readFile(certFile, "utf8") };
}

export interface IssuedCertificate {
  certFile: string;
  keyFile: string;
}

/**
 * A key and a certificate signed by `ca`, for both TLS roles. `commonName` is what go-choria reads
 * as the holder's name (a v1 client's caller id, a v1 node's identity); the brokers' certificates
 * name 127.0.0.1 and localhost, where they listen. The key is P-256, or RSA 2048 for a protocol v1
 * client: go-choria's file security provider signs v1 requests with RSA keys only.
 */
export async function issueCertificate(
  ca: CertificateAuthority,
  dir: string,
  commonName = "localhost",
  options: { rsa?: boolean } = {},
): Promise<IssuedCertificate> {
  await mkdir(dir, { recursive: true });
  const keyFile = join(dir, "key.pem");
  const csrFile = join(dir, "request.csr");
  const certFile = join(dir, "certificate.pem");
  const extFile = join(dir, "extensions.ext");
  await writeFile(extFile, `subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:${commonName}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  const keyArgs = options.rsa ? ["-newkey", "rsa:2048"] : ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
  await run("openssl", ["req", ...keyArgs, "-nodes", "-keyout", keyFile, "-out", csrFile, "-subj", `/CN=${commonName}`]);
  await run("openssl", [
    "x509", "-req", "-in", csrFile, "-CA", ca.certFile, "-CAkey", ca.keyFile, "-CAcreateserial",
    "-CAserial", join(dir, "ca.srl"), "-out", certFile, "-days", "2", "-extfile", extFile,
  ]);
  return { certFile, keyFile };
}

export interface ChoriaBrokerOptions {
  build: ChoriaBuild;
  ca: CertificateAuthority;
  /** Where the broker's configuration, certificate and log go. */
  dir: string;
  /** Its identity is `<name>.broker.realfleet.example.net`. */
  name: string;
  provisioning?: { password: string; signerFile: string };
  /** Hex ed25519 public keys trusted to sign server and client JWTs. */
  jwtSigners?: string[];
  /** Choria Streams (JetStream in the choria account, go-choria's system streams); default true. */
  streams?: boolean;
}

export interface ChoriaBroker extends TlsBroker {
  readonly configFile: string;
  readonly logFile: string;
  /** Everything the broker logged so far. */
  log(): Promise<string>;
}

/** How long a broker may take to listen and make its streams; it is one Go process reading a small file, on a machine that may be loaded. */
const READY_TIMEOUT_MS = 60_000;
/** First starts tried when the port was taken in between: three losses in a row would mean more than a race. */
const PORT_ATTEMPTS = 3;
/** go-choria gives its components 10 s to stop. */
const STOP_KILL_AFTER_MS = 12_000;

export async function startChoriaBroker(options: ChoriaBrokerOptions): Promise<ChoriaBroker> {
  const { build, ca, dir, name } = options;
  await mkdir(dir, { recursive: true });
  const identity = `${name}.broker.realfleet.example.net`;
  const certificate = await issueCertificate(ca, join(dir, "tls"));
  const configFile = join(dir, "broker.conf");
  const logFile = join(dir, "broker.log");
  const streams = options.streams ?? true;
  let port = 0;
  const writeConfig = async () => {
    port = await freePort();
    const lines = brokerConfig(options, { identity, port, logFile, certificate, streamStore: streams ? join(dir, "streams") : undefined });
    // The password is a credential: the file is the broker's alone.
    await writeFile(configFile, `${lines.join("\n")}\n`, { mode: 0o600 });
  };

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  const launch = async () => {
    const before = await readyCount(logFile);
    const out = await open(join(dir, "broker.out"), "a");
    try {
      // SIGTERM when this process dies, so no broker outlives a crashed run.
      child = spawn("setpriv", ["--pdeathsig", "TERM", "--", build.binary, "broker", "run", "--config", configFile], {
        stdio: ["ignore", out.fd, out.fd],
      });
    } finally {
      await out.close();
    }
    const current = child;
    exited = new Promise((resolve) => current.once("exit", () => resolve()));
    await waitForReady(logFile, before, () => running(), identity, dir, streams);
  };
  const stopChild = async () => {
    if (!running() || !child) return;
    const current = child;
    const kill = setTimeout(() => current.kill("SIGKILL"), STOP_KILL_AFTER_MS);
    current.kill("SIGTERM");
    await exited;
    clearTimeout(kill);
  };

  // freePort() hands back a port it probed and closed; anything on the machine (a fleet beside this
  // one, an outgoing connection) may bind it before the broker does. The first start then picks
  // another; a restart keeps its port, which nodes and JWTs name by then.
  for (let attempt = 1; ; attempt++) {
    await writeConfig();
    try {
      await launch();
      break;
    } catch (error) {
      if (attempt >= PORT_ATTEMPTS || !/address already in use/.test(String(error))) throw error;
    }
  }
  const url = `nats://127.0.0.1:${port}`;
  const nats: RunningNats = {
    url,
    port,
    get pid() {
      return child?.pid;
    },
    restart: async () => {
      await stopChild();
      await launch();
    },
    stop: stopChild,
  };
  return {
    nats,
    url,
    hostPort: `127.0.0.1:${port}`,
    configFile,
    logFile,
    log: () => readFile(logFile, "utf8").catch(() => ""),
  };
}

/** The broker's configuration file, one setting a line. */
function brokerConfig(
  options: ChoriaBrokerOptions,
  broker: { identity: string; port: number; logFile: string; certificate: IssuedCertificate; streamStore: string | undefined },
): string[] {
  const { identity, port, logFile, certificate, streamStore } = broker;
  const lines = [
    `identity = ${identity}`,
    "loglevel = info",
    `logfile = ${logFile}`,
    "plugin.choria.use_srv = false",
    "plugin.choria.broker_network = true",
    "plugin.choria.network.listen_address = 127.0.0.1",
    `plugin.choria.network.client_port = ${port}`,
    // No cluster, leafnode, gateway, websocket or monitoring listeners: one broker per network.
    "plugin.choria.network.peer_port = 0",
    "plugin.choria.stats_port = 0",
    "plugin.security.provider = file",
    `plugin.security.file.certificate = ${certificate.certFile}`,
    `plugin.security.file.key = ${certificate.keyFile}`,
    `plugin.security.file.ca = ${options.ca.certFile}`,
  ];
  if (streamStore !== undefined) {
    lines.push(
      `plugin.choria.network.stream.store = ${streamStore}`,
      // One broker, so one replica; an explicit count also spares the random 10-70 s wait before
      // go-choria creates its streams (configureSystemStreams) that -1 (the peer count) costs.
      ...["event", "machine", "advisory", "leader_election", "executor"].map((store) => `plugin.choria.network.stream.${store}_replicas = 1`),
    );
  }
  if (options.provisioning) {
    lines.push(
      `plugin.choria.network.provisioning.client_password = ${options.provisioning.password}`,
      `plugin.choria.network.provisioning.signer_cert = ${options.provisioning.signerFile}`,
    );
  }
  if (options.jwtSigners && options.jwtSigners.length > 0) {
    lines.push(
      `plugin.choria.network.server_signer_cert = ${options.jwtSigners.join(",")}`,
      `plugin.choria.network.client_signer_cert = ${options.jwtSigners.join(",")}`,
    );
  }
  return lines;
}

/**
 * The last stream go-choria's configureSystemStreams makes (or, on a restart with the same store,
 * configures again): once it is logged, CHORIA_EVENTS exists.
 */
const LAST_SYSTEM_STREAM = /"msg":"(?:Created|Configured) stream KV_CHORIA_LEADER_ELECTION /g;

/** How many times the broker's NATS server said it is ready (one line per start; restarts append), and its streams were made. */
async function readyCount(logFile: string): Promise<{ server: number; streams: number }> {
  const log = await readFile(logFile, "utf8").catch(() => "");
  return { server: log.split('"msg":"Server is ready"').length - 1, streams: log.match(LAST_SYSTEM_STREAM)?.length ?? 0 };
}

/**
 * Waits until the broker's NATS server logged one more "Server is ready" than `before` (and, with
 * Streams, its system streams once more), or names why not.
 */
async function waitForReady(
  logFile: string,
  before: { server: number; streams: number },
  alive: () => boolean,
  identity: string,
  dir: string,
  streams: boolean,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const now = await readyCount(logFile);
    if (now.server > before.server && (!streams || now.streams > before.streams)) return;
    if (!alive()) {
      const output = await readFile(join(dir, "broker.out"), "utf8").catch(() => "");
      const log = await readFile(logFile, "utf8").catch(() => "");
      throw new Error(`choria broker ${identity} exited before it was ready: ${(output + log).slice(-1500)}`);
    }
    if (Date.now() > deadline) throw new Error(`choria broker ${identity} was not ready within ${READY_TIMEOUT_MS} ms (see ${dir})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
