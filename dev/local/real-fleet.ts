/**
 * A fleet of real go-choria servers in provisioning mode, for the real-fleet suite, the peer
 * benchmark and `npm run realfleet`. The server binary comes from scripts/peers/build-choria.sh.
 *
 * What a packaged node looks like, and how this harness reproduces it:
 * - The binary has a provisioning JWT path baked in (`build.ProvisionJWTFile`). That file's claims
 *   (broker URLs, token, `--default`, `--protocol-v2`) put the node in provisioning mode when its
 *   configuration file is missing. Every node runs in its own mount namespace with its own JWT
 *   directory bind-mounted over the baked path, so fleets with different JWTs can run side by side.
 * - In provisioning mode a node's identity is its hostname (configuration is ignored), so each node
 *   runs in its own UTS namespace (`unshare -u`, needs root) with hostname = identity. Identities
 *   have at least two dots, so go-choria never asks DNS for a domain.
 * - It dials the provisioning broker over TLS without verifying the certificate and presents the
 *   provisioning JWT as the NATS token: the provisioning broker here is a TLS nats-server with a
 *   certificate signed by a CA this harness makes.
 * - `configure` writes server.conf (and server.jwt / server.seed, ssl/) next to the configuration
 *   file; `restart` re-executes the binary by os.Args[0], so nodes start by absolute path.
 * - After the restart the node joins the network named in its new configuration: a second TLS
 *   nats-server here (the target broker), where its startup event is the proof it arrived.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { appendFile, mkdir, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { encodeHex, generateEd25519Seed, ed25519SigningKey } from "../../lib/crypto";
import { startNats, type RunningNats } from "./services";

const run = promisify(execFile);

export const CHORIA_VERSION = "v0.30.2";

/** Where scripts/peers/build-choria.sh keeps its output. */
export function peersDir(): string {
  return process.env.CHORIA_PEERS_DIR ?? join(homedir(), ".cache", "choria-peers");
}

export interface ChoriaBuild {
  binary: string;
  version: string;
  /** The provisioning JWT path compiled into the binary. */
  provisionJwtFile: string;
}

/** The built server, or an error saying how to build it. */
export function choriaBuild(dir: string = peersDir()): ChoriaBuild {
  const binary = join(dir, "bin", `choria-${CHORIA_VERSION}`);
  const envFile = `${binary}.env`;
  if (!existsSync(binary) || !existsSync(envFile)) {
    throw new Error(`go-choria ${CHORIA_VERSION} is not built in ${dir}: run scripts/peers/build-choria.sh`);
  }
  const facts = Object.fromEntries(
    readFileSync(envFile, "utf8")
      .split("\n")
      .filter((line) => line.includes("="))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
  const provisionJwtFile = facts.CHORIA_PROVISION_JWT_FILE;
  if (!provisionJwtFile) throw new Error(`${envFile} names no CHORIA_PROVISION_JWT_FILE`);
  return { binary, version: facts.CHORIA_VERSION ?? CHORIA_VERSION.slice(1), provisionJwtFile };
}

export interface CertificateAuthority {
  certFile: string;
  keyFile: string;
  certPem: string;
}

export interface TlsBroker {
  nats: RunningNats;
  url: string;
  /** host:port, the form go-choria's middleware_hosts takes. */
  hostPort: string;
}

export interface RealNode {
  readonly identity: string;
  readonly dir: string;
  /** The node's configuration directory (empty at first) and file. */
  readonly configDir: string;
  readonly configFile: string;
  readonly logFile: string;
  /** Process id of the node's wrapper shell (the server is its only child). */
  readonly pid: number | undefined;
  readonly running: boolean;
  /** Everything the node logged so far (all its executions: restart re-executes in place). */
  log(): Promise<string>;
  /** The node's written configuration as key/value pairs, or undefined before `configure`. */
  config(): Promise<Record<string, string> | undefined>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Stops the node, deletes everything it wrote (config dir, log) and leaves it stopped. */
  reset(): Promise<void>;
}

export interface AddNodeOptions {
  start?: boolean;
  jwtFileSuffix?: string;
}

export interface RealFleetOptions {
  /** Identities of the nodes to create (each must have at least two dots). */
  identities: string[];
  /** `jwt prov --protocol-v2`. */
  protocolV2?: boolean;
  /** The provisioning token in the JWT (`--token`); it must be non-empty for a node to provision. */
  token?: string;
  /** Start the nodes at once (default true). */
  start?: boolean;
  build?: ChoriaBuild;
}

export interface RealFleet {
  readonly build: ChoriaBuild;
  readonly dir: string;
  readonly ca: CertificateAuthority;
  /** The TLS broker nodes in provisioning mode dial. */
  readonly provisioningBroker: TlsBroker;
  /** The TLS broker the helper sends provisioned nodes to. */
  readonly targetBroker: TlsBroker;
  /** The provisioning JWT as `choria jwt prov` wrote it, and the key pair that signed it. */
  readonly provisioningJwtFile: string;
  readonly provisioningJwt: string;
  readonly signer: { seedFile: string; publicKeyFile: string; publicKeyHex: string };
  readonly token: string;
  readonly nodes: Map<string, RealNode>;
  /**
   * A protocol v2 client identity for the provisioner: a client JWT made by `choria jwt client`
   * (signed by the fleet's signer, `--server-provisioner`) and its ed25519 seed, as files.
   */
  clientCredentials(callerId: string): Promise<{ jwtFile: string; seedFile: string; jwt: string; seedHex: string }>;
  /**
   * Creates (and starts) another node. `jwtFileSuffix` is appended to its provisioning.jwt (e.g. the
   * trailing newline a file written by config management has; the node sends the file as it is).
   */
  addNode(identity: string, options?: AddNodeOptions): Promise<RealNode>;
  /** Starts every stopped node. */
  startAll(): Promise<void>;
  /** Every node reset to an empty configuration directory (stopped; call startAll). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startRealFleet(options: RealFleetOptions): Promise<RealFleet> {
  const build = options.build ?? choriaBuild();
  const token = options.token ?? "real-fleet-provisioning-token";
  if (token === "") throw new Error("a real node ignores a provisioning JWT with an empty token");
  const dir = await mkdtemp(join(tmpdir(), "choria-real-fleet-"));
  const cleanup: Array<() => Promise<unknown>> = [() => rm(dir, { recursive: true, force: true })];
  const nodes = new Map<string, RealNode>();
  const stopAll = async () => {
    await Promise.all([...nodes.values()].map((node) => node.stop()));
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    cleanup.length = 0;
  };

  try {
    const ca = await makeCertificateAuthority(join(dir, "ca"));
    const [provisioningBroker, targetBroker] = await Promise.all([
      startTlsBroker(ca, join(dir, "provisioning-broker")),
      startTlsBroker(ca, join(dir, "target-broker")),
    ]);
    cleanup.push(() => provisioningBroker.nats.stop(), () => targetBroker.nats.stop());

    const signerDir = join(dir, "signer");
    await mkdir(signerDir, { recursive: true });
    const seed = generateEd25519Seed();
    const signer = ed25519SigningKey(seed);
    const publicKeyHex = signer.alg === "EdDSA" ? signer.publicKeyHex : "";
    const signerFiles = { seedFile: join(signerDir, "provisioning.seed"), publicKeyFile: join(signerDir, "provisioning.public"), publicKeyHex };
    await writeFile(signerFiles.seedFile, encodeHex(seed), { mode: 0o600 });
    await writeFile(signerFiles.publicKeyFile, publicKeyHex);

    const provisioningJwtFile = join(dir, "provisioning.jwt");
    await run(build.binary, [
      "jwt",
      "prov",
      provisioningJwtFile,
      signerFiles.seedFile,
      "--token",
      token,
      "--urls",
      provisioningBroker.url,
      "--default",
      ...(options.protocolV2 ? ["--protocol-v2"] : []),
    ]);
    const provisioningJwt = await readFile(provisioningJwtFile, "utf8");

    const nodesDir = join(dir, "nodes");
    const addNode = async (identity: string, nodeOptions: AddNodeOptions = {}): Promise<RealNode> => {
      if (nodes.has(identity)) throw new Error(`node ${identity} exists`);
      const jwtFile = provisioningJwt + (nodeOptions.jwtFileSuffix ?? "");
      const node = await createNode({ identity, root: join(nodesDir, identity), build, provisioningJwt: jwtFile });
      nodes.set(identity, node);
      if (nodeOptions.start ?? true) await node.start();
      return node;
    };
    for (const identity of options.identities) await addNode(identity, { start: false });
    if (options.start ?? true) await Promise.all([...nodes.values()].map((node) => node.start()));

    let stopped = false;
    return {
      build,
      dir,
      ca,
      provisioningBroker,
      targetBroker,
      provisioningJwtFile,
      provisioningJwt,
      signer: signerFiles,
      token,
      nodes,
      addNode,
      async clientCredentials(callerId) {
        const clientDir = await mkdtemp(join(dir, "client-"));
        const seed = generateEd25519Seed();
        const key = ed25519SigningKey(seed);
        const seedHex = encodeHex(seed);
        const seedFile = join(clientDir, "client.seed");
        const jwtFile = join(clientDir, "client.jwt");
        await writeFile(seedFile, seedHex, { mode: 0o600 });
        await run(build.binary, [
          "jwt", "client", jwtFile, callerId, signerFiles.seedFile,
          "--public-key", key.alg === "EdDSA" ? key.publicKeyHex : "",
          "--server-provisioner", "--validity", "24h",
        ]);
        return { jwtFile, seedFile, jwt: (await readFile(jwtFile, "utf8")).trim(), seedHex };
      },
      async startAll() {
        await Promise.all([...nodes.values()].filter((node) => !node.running).map((node) => node.start()));
      },
      async reset() {
        await Promise.all([...nodes.values()].map((node) => node.reset()));
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        await stopAll();
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
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

/** A key and a certificate for 127.0.0.1 / localhost signed by the CA. */
async function issueServerCertificate(ca: CertificateAuthority, dir: string): Promise<{ certFile: string; keyFile: string }> {
  await mkdir(dir, { recursive: true });
  const keyFile = join(dir, "server.key");
  const csrFile = join(dir, "server.csr");
  const certFile = join(dir, "server.pem");
  const extFile = join(dir, "server.ext");
  await writeFile(extFile, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n");
  await run("openssl", [
    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", keyFile, "-out", csrFile, "-subj", "/CN=localhost",
  ]);
  await run("openssl", [
    "x509", "-req", "-in", csrFile, "-CA", ca.certFile, "-CAkey", ca.keyFile, "-CAcreateserial",
    "-out", certFile, "-days", "2", "-extfile", extFile,
  ]);
  return { certFile, keyFile };
}

/** nats-server that requires TLS from every client (no client certificates asked for). */
export async function startTlsBroker(ca: CertificateAuthority, dir: string): Promise<TlsBroker> {
  const { certFile, keyFile } = await issueServerCertificate(ca, dir);
  const nats = await startNats({ args: ["--tls", "--tlscert", certFile, "--tlskey", keyFile] });
  return { nats, url: nats.url, hostPort: `127.0.0.1:${nats.port}` };
}

interface NodeInput {
  identity: string;
  root: string;
  build: ChoriaBuild;
  provisioningJwt: string;
}

async function createNode(input: NodeInput): Promise<RealNode> {
  const { identity, root, build } = input;
  if (identity.split(".").length < 3) throw new Error(`identity ${identity} needs at least two dots (go-choria would look up its domain)`);
  const configDir = join(root, "etc");
  const jwtDir = join(root, "provisioning");
  const configFile = join(configDir, "server.conf");
  const logFile = join(root, "node.log");
  await mkdir(configDir, { recursive: true });
  await mkdir(jwtDir, { recursive: true });
  await writeFile(join(jwtDir, "provisioning.jwt"), input.provisioningJwt, { mode: 0o600 });

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  const node: RealNode = {
    identity,
    dir: root,
    configDir,
    configFile,
    logFile,
    get pid() {
      return child?.pid;
    },
    get running() {
      return running();
    },
    log: () => readFile(logFile, "utf8").catch(() => ""),
    async config() {
      const text = await readFile(configFile, "utf8").catch(() => undefined);
      return text === undefined ? undefined : parseChoriaConfig(text);
    },
    async start() {
      if (running()) return;
      await mkdir(configDir, { recursive: true });
      const log = await open(logFile, "a");
      try {
        // The server runs under a small sh that has its own hostname and its own view of the baked
        // JWT directory (both inherited by the server, also across its `restart` re-exec). The sh
        // gets SIGTERM when this process dies (setpriv --pdeathsig; the server's own parent-death
        // signal would not survive Go's re-exec from another thread) and passes it on, so no server
        // outlives a crashed run; stop() signals the sh the same way.
        child = spawn(
          "unshare",
          [
            "--uts", "--mount", "--propagation", "private", "--", "setpriv", "--pdeathsig", "TERM", "--",
            "sh", "-c", NODE_WRAPPER,
            "choria-node", identity, jwtDir, dirnameOf(build.provisionJwtFile), build.binary, configFile,
          ],
          // Its own process group, so a server that ignores SIGTERM can be killed with its wrapper.
          { stdio: ["ignore", log.fd, log.fd], detached: true },
        );
      } finally {
        await log.close();
      }
      const current = child;
      exited = new Promise((resolve) => current.once("exit", () => resolve()));
      current.once("error", (error) => void appendFile(logFile, `harness: could not start node: ${String(error)}\n`));
    },
    async stop() {
      if (!running() || !child) return;
      const current = child;
      // go-choria allows itself 10 s to shut down.
      const kill = setTimeout(() => current.pid !== undefined && process.kill(-current.pid, "SIGKILL"), 12_000);
      current.kill("SIGTERM");
      await exited;
      clearTimeout(kill);
    },
    async reset() {
      await node.stop();
      await rm(configDir, { recursive: true, force: true });
      await rm(logFile, { force: true });
      await mkdir(configDir, { recursive: true });
    },
  };
  return node;
}

/** $1 identity, $2 the node's JWT directory, $3 the baked JWT directory, $4 binary, $5 config file. */
const NODE_WRAPPER = [
  'hostname "$1" && mount --bind "$2" "$3" || exit 1',
  '"$4" server run --config "$5" & server=$!',
  'trap \'kill -TERM "$server" 2>/dev/null\' TERM INT',
  'wait "$server"; status=$?',
  // A trapped signal ends the first wait early; the second waits for the server itself to exit.
  'kill -0 "$server" 2>/dev/null && { wait "$server"; status=$?; }',
  'exit "$status"',
].join("\n");

function dirnameOf(path: string): string {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}

/** go-choria's `key = value` configuration format (comments with # or ;). */
export function parseChoriaConfig(text: string): Record<string, string> {
  const config: Record<string, string> = {};
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const equals = line.indexOf("=");
    if (equals < 0) continue;
    config[line.slice(0, equals).trim()] = line.slice(equals + 1).trim();
  }
  return config;
}
