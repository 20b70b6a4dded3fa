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
 *   provisioning JWT as the NATS token. Both brokers are go-choria's own (`choria broker run`,
 *   real-fleet-broker.ts) with certificates from a CA this harness makes: the provisioning broker
 *   has the provisioning account on and trusts the key that signed the provisioning JWT, so a node
 *   lands in that account with the broker's provisioning-node permissions, and the provisioner gets
 *   in only as user `provisioner` with the broker password and a certificate the CA signed.
 * - `configure` writes server.conf (and server.jwt / server.seed, ssl/) next to the configuration
 *   file; `restart` re-executes the binary by os.Args[0], so nodes start by absolute path.
 * - After the restart the node joins the network named in its new configuration: the target broker,
 *   where it authenticates as a production node does (v1: the certificate the helper had signed,
 *   mTLS; v2: its server JWT, signed by the site signer the target broker trusts) and where its
 *   startup event is the proof it arrived. An admin client (`adminClient`) talks to it there with
 *   the real `choria` CLI.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { appendFile, mkdir, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import { encodeHex } from "../../lib/crypto/encoding";
import { ed25519SigningKey, generateEd25519Seed } from "../../test/support/choria-node/keys";
import {
  issueCertificate,
  makeCertificateAuthority,
  startChoriaBroker,
  type CertificateAuthority,
  type ChoriaBroker,
  type ChoriaBuild,
  type IssuedCertificate,
  type TlsBroker,
} from "./real-fleet-broker";
import { startNats } from "./services";

export { issueCertificate, makeCertificateAuthority, type CertificateAuthority, type TlsBroker } from "./real-fleet-broker";

const run = promisify(execFile);

const CHORIA_VERSION = "v0.30.2";

/** The site administrator's name: the v1 certificate `admin.mcollective`, the v2 caller id `admin`. */
const ADMIN_NAME = "admin";

/** Where scripts/peers/build-choria.sh keeps its output. */
function peersDir(): string {
  return process.env.CHORIA_PEERS_DIR ?? join(homedir(), ".cache", "choria-peers");
}

/** The built server, or an error saying how to build it. */
function choriaBuild(dir: string = peersDir()): ChoriaBuild {
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

interface AddNodeOptions {
  start?: boolean;
  /**
   * The key the node is kept under in `nodes` and the name of its directory; default its identity.
   * A second node with an identity the fleet has needs one (two machines answering as one identity).
   */
  name?: string;
  jwtFileSuffix?: string;
  /** Another provisioning JWT instead of the fleet's (e.g. one `foreignProvisioningJwt` made). */
  provisioningJwt?: string;
  /** v1 action policy files (agent name -> text) for this node over the fleet's (e.g. one that denies an agent). */
  policies?: Record<string, string>;
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
  /**
   * The target broker's certificate comes from a second CA, not the fleet's: a node that verifies
   * the target broker must refuse it.
   */
  targetCertificateFromOtherCa?: boolean;
  /** More v1 action policy files (agent name -> text) every node finds at start (e.g. choria_provision's for renewal). */
  policies?: Record<string, string>;
}

/** An ed25519 key as the files go-choria's `jwt` commands take (hex seed) and its public half. */
interface SignerFiles {
  seedFile: string;
  publicKeyFile: string;
  publicKeyHex: string;
}

interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface ClientCredentialOptions {
  /**
   * Signed by the site signer (which the target broker and the provisioned v2 nodes trust) instead
   * of the provisioning signer: a client that also acts on provisioned nodes (renewal).
   */
  siteSigned?: boolean;
  /** `--agents`: what a provisioned v2 node (rpcauthprovider aaasvc) lets the client call. */
  agents?: string[];
}

/** The site's administrator: the real `choria` CLI with a client configuration for the target broker. */
interface AdminClient {
  readonly callerId: string;
  readonly configFile: string;
  /** Runs `choria <args> --config <configFile>`; never throws for a non-zero exit. */
  choria(args: string[], timeoutMs?: number): Promise<CommandResult>;
}

export interface RealFleet {
  readonly build: ChoriaBuild;
  readonly dir: string;
  readonly ca: CertificateAuthority;
  readonly protocolV2: boolean;
  /** The Choria broker nodes in provisioning mode dial (provisioning account on). */
  readonly provisioningBroker: ChoriaBroker;
  /** The Choria broker the helper sends provisioned nodes to. */
  readonly targetBroker: ChoriaBroker;
  /** `plugin.choria.network.provisioning.client_password` of the provisioning broker. */
  readonly provisioningPassword: string;
  /** The provisioner's client certificate (CA-signed): the provisioning user must be a verified TLS client. */
  readonly provisionerCertificate: IssuedCertificate;
  /** The CA of the target broker's certificate: `ca`, or the other CA of `targetCertificateFromOtherCa`. */
  readonly targetCa: CertificateAuthority;
  /** A client certificate `targetCa` signed, for observers on the target broker (mTLS). */
  readonly targetObserverCertificate: IssuedCertificate;
  /** The provisioning JWT as `choria jwt prov` wrote it, and the key pair that signed it. */
  readonly provisioningJwtFile: string;
  readonly provisioningJwt: string;
  readonly signer: SignerFiles;
  /**
   * The site's signer: it signs server JWTs (the provisioner's `jwt_signing_key`) and the admin
   * client's JWT; the target broker and the provisioned v2 nodes trust it.
   */
  readonly siteSigner: SignerFiles;
  readonly token: string;
  readonly nodes: Map<string, RealNode>;
  /**
   * A protocol v2 client identity for the provisioner: a client JWT made by `choria jwt client`
   * (signed by the fleet's signer, `--server-provisioner`) and its ed25519 seed, as files.
   */
  clientCredentials(callerId: string, options?: ClientCredentialOptions): Promise<{ jwtFile: string; seedFile: string; jwt: string; seedHex: string }>;
  /**
   * Creates (and starts) another node. `jwtFileSuffix` is appended to its provisioning.jwt (e.g. the
   * trailing newline a file written by config management has; the node sends the file as it is).
   */
  addNode(identity: string, options?: AddNodeOptions): Promise<RealNode>;
  /**
   * The site's admin client on the target broker: v1 a certificate the CA signed (mTLS, caller
   * `choria=<name>`), v2 a client JWT from the site signer allowed the agents in `agents`
   * (default `rpcutil.*`) and its seed.
   */
  adminClient(options?: { name?: string; agents?: string[] }): Promise<AdminClient>;
  /** A provisioning JWT with the fleet's claims signed by a fresh key the brokers do not trust. */
  foreignProvisioningJwt(): Promise<string>;
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
  const protocolV2 = options.protocolV2 ?? false;
  const dir = await mkdtemp(join(tmpdir(), "choria-real-fleet-"));
  const cleanup: Array<() => Promise<unknown>> = [() => rm(dir, { recursive: true, force: true })];
  const nodes = new Map<string, RealNode>();
  const stopAll = async () => {
    await Promise.all([...nodes.values()].map((node) => node.stop()));
    for (const step of cleanup.reverse()) await step().catch(() => undefined);
    cleanup.length = 0;
  };

  try {
    const site = await startFleetSite(build, dir, options, cleanup);
    const { ca, provisioningBroker, targetBroker, signer, siteSigner } = site;
    const jwtClaims = { token, brokerUrl: provisioningBroker.url, protocolV2 };
    const makeProvisioningJwt = (file: string, seedFile: string) => writeProvisioningJwt(build, jwtClaims, file, seedFile);
    const provisioningJwtFile = join(dir, "provisioning.jwt");
    const provisioningJwt = await makeProvisioningJwt(provisioningJwtFile, signer.seedFile);

    const policies = nodePolicies(options);
    const nodesDir = join(dir, "nodes");
    const addNode = async (identity: string, nodeOptions: AddNodeOptions = {}): Promise<RealNode> => {
      const name = nodeOptions.name ?? identity;
      if (nodes.has(name)) throw new Error(`node ${name} exists`);
      const jwtFile = (nodeOptions.provisioningJwt ?? provisioningJwt) + (nodeOptions.jwtFileSuffix ?? "");
      const node = await createNode({ identity, root: join(nodesDir, name), build, provisioningJwt: jwtFile, policies: { ...policies, ...nodeOptions.policies } });
      nodes.set(name, node);
      if (nodeOptions.start ?? true) await node.start();
      return node;
    };
    for (const identity of options.identities) await addNode(identity, { start: false });
    if (options.start ?? true) await Promise.all([...nodes.values()].map((node) => node.start()));

    let stopped = false;
    return {
      build,
      dir,
      protocolV2,
      ...site,
      provisioningJwtFile,
      provisioningJwt,
      token,
      nodes,
      addNode,
      adminClient: (adminOptions = {}) => makeAdminClient({ build, ca, dir, broker: targetBroker, siteSigner, protocolV2, ...adminOptions }),
      clientCredentials: (callerId, credentialOptions = {}) =>
        makeClientCredentials(build, dir, callerId, credentialOptions.siteSigned ? siteSigner.seedFile : signer.seedFile, credentialOptions.agents ?? []),
      async foreignProvisioningJwt() {
        const foreignDir = await mkdtemp(join(dir, "foreign-signer-"));
        const foreign = await makeSigner(foreignDir, "foreign");
        return makeProvisioningJwt(join(foreignDir, "provisioning.jwt"), foreign.seedFile);
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

/** What the fleet runs on besides its nodes: the CAs, the signers, the two brokers and the clients' certificates. */
type FleetSite = Pick<
  RealFleet,
  | "ca"
  | "targetCa"
  | "signer"
  | "siteSigner"
  | "provisioningPassword"
  | "provisioningBroker"
  | "targetBroker"
  | "provisionerCertificate"
  | "targetObserverCertificate"
>;

/** Makes the fleet's keys and certificates and starts its brokers, whose stops go onto `cleanup`. */
async function startFleetSite(build: ChoriaBuild, dir: string, options: RealFleetOptions, cleanup: Array<() => Promise<unknown>>): Promise<FleetSite> {
  const ca = await makeCertificateAuthority(join(dir, "ca"));
  const signer = await makeSigner(join(dir, "signer"), "provisioning");
  const siteSigner = await makeSigner(join(dir, "site-signer"), "site");
  const provisioningPassword = randomBytes(18).toString("base64url");
  const targetCa = options.targetCertificateFromOtherCa ? await makeCertificateAuthority(join(dir, "other-ca")) : ca;
  const [provisioningBroker, targetBroker] = await Promise.all([
    startChoriaBroker({
      build,
      ca,
      dir: join(dir, "provisioning-broker"),
      name: "provisioning",
      provisioning: { password: provisioningPassword, signerFile: signer.publicKeyFile },
    }),
    startChoriaBroker({
      build,
      ca: targetCa,
      dir: join(dir, "target-broker"),
      name: "target",
      ...(options.protocolV2 ? { jwtSigners: [siteSigner.publicKeyHex] } : {}),
    }),
  ]);
  cleanup.push(() => provisioningBroker.nats.stop(), () => targetBroker.nats.stop());
  const provisionerCertificate = await issueCertificate(ca, join(dir, "provisioner-tls"), "provisioner.realfleet.example.net", {
    rsa: !options.protocolV2,
  });
  const targetObserverCertificate = await issueCertificate(targetCa, join(dir, "target-observer-tls"), "observer.realfleet.example.net");
  return { ca, targetCa, signer, siteSigner, provisioningPassword, provisioningBroker, targetBroker, provisionerCertificate, targetObserverCertificate };
}

/** `choria jwt prov` into `file`, signed with `seedFile`: the fleet's token and provisioning broker. */
async function writeProvisioningJwt(
  build: ChoriaBuild,
  claims: { token: string; brokerUrl: string; protocolV2: boolean },
  file: string,
  seedFile: string,
): Promise<string> {
  await run(build.binary, [
    "jwt",
    "prov",
    file,
    seedFile,
    "--token",
    claims.token,
    "--urls",
    claims.brokerUrl,
    "--default",
    ...(claims.protocolV2 ? ["--protocol-v2"] : []),
  ]);
  return readFile(file, "utf8");
}

/**
 * A v1 node authorizes requests by action policy files, which a site ships with the package or
 * config management (provisioning cannot write them): here the admin may use rpcutil. A v2 node
 * authorizes by the agent list in the caller's JWT (rpcauthprovider aaasvc) and needs none.
 */
function nodePolicies(options: RealFleetOptions): Record<string, string> {
  return options.protocolV2 ? {} : { rpcutil: `policy default deny\nallow\tchoria=${ADMIN_NAME}.mcollective\t*\t*\t*\n`, ...options.policies };
}

/** `choria jwt client` in a new directory under `dir`: a v2 client JWT signed with `signerSeedFile`, and the client's seed. */
async function makeClientCredentials(build: ChoriaBuild, dir: string, callerId: string, signerSeedFile: string, agents: string[]) {
  const clientDir = await mkdtemp(join(dir, "client-"));
  const seed = generateEd25519Seed();
  const key = ed25519SigningKey(seed);
  const seedHex = encodeHex(seed);
  const seedFile = join(clientDir, "client.seed");
  const jwtFile = join(clientDir, "client.jwt");
  await writeFile(seedFile, seedHex, { mode: 0o600 });
  await run(build.binary, [
    "jwt", "client", jwtFile, callerId, signerSeedFile,
    "--public-key", key.alg === "EdDSA" ? key.publicKeyHex : "",
    ...agents.flatMap((agent) => ["--agents", agent]),
    "--server-provisioner", "--validity", "24h",
  ]);
  return { jwtFile, seedFile, jwt: (await readFile(jwtFile, "utf8")).trim(), seedHex };
}

/** A fresh ed25519 key pair as go-choria's files: the hex seed (mode 600) and the hex public key. */
async function makeSigner(dir: string, name: string): Promise<SignerFiles> {
  await mkdir(dir, { recursive: true });
  const seed = generateEd25519Seed();
  const key = ed25519SigningKey(seed);
  const publicKeyHex = key.alg === "EdDSA" ? key.publicKeyHex : "";
  const files = { seedFile: join(dir, `${name}.seed`), publicKeyFile: join(dir, `${name}.public`), publicKeyHex };
  await writeFile(files.seedFile, encodeHex(seed), { mode: 0o600 });
  // No newline: the broker reads the file's bytes as the hex key (signer_cert).
  await writeFile(files.publicKeyFile, publicKeyHex);
  return files;
}

interface AdminClientInput {
  build: ChoriaBuild;
  ca: CertificateAuthority;
  dir: string;
  broker: TlsBroker;
  siteSigner: SignerFiles;
  protocolV2: boolean;
  name?: string;
  agents?: string[];
}

async function makeAdminClient(input: AdminClientInput): Promise<AdminClient> {
  const name = input.name ?? ADMIN_NAME;
  const clientDir = await mkdtemp(join(input.dir, `admin-${name}-`));
  const configFile = join(clientDir, "client.conf");
  const lines = [
    "loglevel = warn",
    "collectives = mcollective",
    "main_collective = mcollective",
    "plugin.choria.use_srv = false",
    `plugin.choria.middleware_hosts = ${input.broker.hostPort}`,
  ];
  let callerId: string;
  // A client's identity is its user name (USER), as on an administrator's workstation; a v1
  // client's certificate name is given as MCOLLECTIVE_CERTNAME (as root it would be the host name).
  const env: Record<string, string> = { USER: name };
  if (input.protocolV2) {
    callerId = name;
    const seed = generateEd25519Seed();
    const key = ed25519SigningKey(seed);
    const seedFile = join(clientDir, "client.seed");
    const tokenFile = join(clientDir, "client.jwt");
    await writeFile(seedFile, encodeHex(seed), { mode: 0o600 });
    await run(input.build.binary, [
      "jwt", "client", tokenFile, callerId, input.siteSigner.seedFile,
      "--public-key", key.alg === "EdDSA" ? key.publicKeyHex : "",
      // The site's policy travels in the token: nodes with rpcauthprovider=aaasvc allow these agents.
      ...(input.agents ?? ["rpcutil.*"]).flatMap((agent) => ["--agents", agent]),
      "--validity", "24h",
    ]);
    lines.push(
      "plugin.security.provider = choria",
      `plugin.security.choria.token_file = ${tokenFile}`,
      `plugin.security.choria.seed_file = ${seedFile}`,
      `plugin.security.choria.ca = ${input.ca.certFile}`,
    );
  } else {
    const certname = `${name}.mcollective`;
    callerId = `choria=${certname}`;
    env.MCOLLECTIVE_CERTNAME = certname;
    const certificate = await issueCertificate(input.ca, join(clientDir, "tls"), certname, { rsa: true });
    lines.push(
      "plugin.security.provider = file",
      `plugin.security.file.certificate = ${certificate.certFile}`,
      `plugin.security.file.key = ${certificate.keyFile}`,
      `plugin.security.file.ca = ${input.ca.certFile}`,
    );
  }
  await writeFile(configFile, `${lines.join("\n")}\n`);
  return {
    callerId,
    configFile,
    choria: (args, timeoutMs = 60_000) =>
      new Promise((resolve) => {
        // stdin is closed: `choria req` reads node names from a piped stdin instead of discovering.
        const child = spawn(input.build.binary, [...args, "--config", configFile], {
          env: { ...process.env, ...env },
          stdio: ["ignore", "pipe", "pipe"],
          timeout: timeoutMs,
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        child.once("error", (error) => resolve({ code: -1, stdout, stderr: `${stderr}${String(error)}` }));
        child.once("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
      }),
  };
}

/** nats-server that requires TLS from every client (no client certificates asked for). */
export async function startTlsBroker(ca: CertificateAuthority, dir: string): Promise<TlsBroker> {
  const { certFile, keyFile } = await issueCertificate(ca, dir);
  const nats = await startNats({ args: ["--tls", "--tlscert", certFile, "--tlskey", keyFile] });
  return { nats, url: nats.url, hostPort: `127.0.0.1:${nats.port}` };
}

interface NodeInput {
  identity: string;
  root: string;
  build: ChoriaBuild;
  provisioningJwt: string;
  /** Action policy files (agent name -> text) the node finds in `<configDir>/policies` at start. */
  policies: Record<string, string>;
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
      await mkdir(join(configDir, "policies"), { recursive: true });
      for (const [agent, policy] of Object.entries(input.policies)) await writeFile(join(configDir, "policies", `${agent}.policy`), policy);
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

interface TreeMemory {
  /** Resident set sizes summed: the binary's shared pages are counted once per process. */
  rssBytes: number;
  /** Proportional set sizes summed: shared pages split between the processes sharing them. */
  pssBytes: number;
}

/** Memory of process `pid` and all its descendants, from /proc. */
async function treeMemory(pid: number | undefined): Promise<TreeMemory> {
  if (pid === undefined) return { rssBytes: 0, pssBytes: 0 };
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, "utf8").catch(() => "");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(rollup)?.[1] ?? 0) * 1024;
  const total = { rssBytes: kib("Rss"), pssBytes: kib("Pss") };
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, "utf8").catch(() => "");
  for (const child of children.split(" ").filter(Boolean)) {
    const memory = await treeMemory(Number(child));
    total.rssBytes += memory.rssBytes;
    total.pssBytes += memory.pssBytes;
  }
  return total;
}

export interface FleetMemory {
  /** Every node: its server and its wrapper shell. */
  nodes: TreeMemory;
  perNode: TreeMemory;
  brokers: TreeMemory;
}

/** What the fleet's processes hold in memory now. */
export async function fleetMemory(fleet: RealFleet): Promise<FleetMemory> {
  const sum = (parts: TreeMemory[]) => parts.reduce((total, part) => ({ rssBytes: total.rssBytes + part.rssBytes, pssBytes: total.pssBytes + part.pssBytes }), { rssBytes: 0, pssBytes: 0 });
  const nodes = [...fleet.nodes.values()];
  const nodesMemory = sum(await Promise.all(nodes.map((node) => treeMemory(node.pid))));
  const count = Math.max(nodes.length, 1);
  return {
    nodes: nodesMemory,
    perNode: { rssBytes: Math.round(nodesMemory.rssBytes / count), pssBytes: Math.round(nodesMemory.pssBytes / count) },
    brokers: sum([await treeMemory(fleet.provisioningBroker.nats.pid), await treeMemory(fleet.targetBroker.nats.pid)]),
  };
}

/** go-choria's `key = value` configuration format (comments with # or ;). */
function parseChoriaConfig(text: string): Record<string, string> {
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
