/**
 * `npm run realfleet`: the provisioner against real go-choria servers on this machine. Builds (or
 * reuses) the pinned server via scripts/peers/build-choria.sh (the npm script runs it first), starts
 * N servers in provisioning mode, each in its own UTS and mount namespace (needs root), go-choria's
 * own broker for the provisioning network (provisioning account, broker password) and for the
 * target network, and the local stack (real handlers, lease, queues, bridge). Prints each node's
 * outcome, the time to all provisioned and the memory the nodes and brokers hold, then pings the
 * fleet and runs `rpcutil inventory` on it as the site's admin client; exits 0 only when every node
 * left provisioning mode, arrived on the target broker and answered the admin.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { fleetMemory } from "../dev/local/real-fleet";
import { UsageError } from "../bench/command";
import { oursSetting } from "../bench/peer-options";
import { goProvisionerFiles, provisionedFleet, provisioningActions, waitForArrivals } from "../dev/local/real-fleet-stack";
import type { FeatureName } from "../dev/local/stack";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const USAGE = `Usage: npm run realfleet -- [options]

  --nodes N          real go-choria servers (default 5)
  --protocol 1|2     provisioning JWT without or with --protocol-v2 (default 2)
  --features LIST    comma list of jwt, ed25519, pki (default jwt,ed25519 for v2, jwt,pki for v1)
  --standby          run a second (standby) deployment
  --go-provisioner PATH  provision with the Go Choria Provisioner binary at PATH
                     (scripts/peers/build-provisioner.sh) instead of the stack; protocol 1 only
  --go-workers N     the Go provisioner's workers (default 4)
  --ours CxW         the stack's provision concurrency x workers per invocation (default: the stack's)
  --timeout S        give up after S seconds (default 300)
  --help

Needs root (unshare), Go (for the first build), nats-server, Java 17, jq and openssl.
`;

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}`);
  process.exit(2);
}

/** An unknown or malformed option is a usage mistake (exit 2), not a stack trace. */
function parseOptions() {
  try {
    return parseArgs({
      options: {
        nodes: { type: "string" },
        protocol: { type: "string" },
        features: { type: "string" },
        standby: { type: "boolean" },
        "go-provisioner": { type: "string" },
        "go-workers": { type: "string" },
        ours: { type: "string" },
        timeout: { type: "string" },
        help: { type: "boolean" },
      },
    });
  } catch (error) {
    fail((error as Error).message);
  }
}

const { values } = parseOptions();
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (process.getuid?.() !== 0) fail("the real fleet needs root: every node runs in its own UTS and mount namespace (unshare)");
const nodes = Number(values.nodes ?? 5);
if (!Number.isInteger(nodes) || nodes < 1) fail(`--nodes must be a positive whole number, got "${values.nodes}"`);
const protocol = values.protocol ?? "2";
if (protocol !== "1" && protocol !== "2") fail(`--protocol must be 1 or 2, got "${protocol}"`);
const features = (values.features ?? (protocol === "2" ? "jwt,ed25519" : "jwt,pki")).split(",").map((item) => item.trim());
for (const feature of features) if (!["jwt", "ed25519", "pki"].includes(feature)) fail(`unknown feature "${feature}"`);
const goProvisioner = values["go-provisioner"];
if (goProvisioner !== undefined && protocol !== "1") fail("--go-provisioner runs protocol 1 fleets only (--protocol 1)");
if (goProvisioner !== undefined && !existsSync(goProvisioner)) fail(`--go-provisioner: no binary at ${goProvisioner}`);
const goWorkers = Number(values["go-workers"] ?? 4);
if (!Number.isInteger(goWorkers) || goWorkers < 1) fail(`--go-workers must be a positive whole number, got "${values["go-workers"]}"`);
if (values["go-workers"] !== undefined && goProvisioner === undefined) fail("--go-workers needs --go-provisioner");
function oursSettingOption(text: string): { maxConcurrency: number; workers: number } {
  try {
    return oursSetting("realfleet", "--ours", text);
  } catch (error) {
    if (error instanceof UsageError) fail(error.message);
    throw error;
  }
}
const ours = values.ours === undefined ? undefined : oursSettingOption(values.ours);
if (values.ours !== undefined && goProvisioner !== undefined) fail("--ours sets the stack, which --go-provisioner leaves idle");
const timeoutSeconds = Number(values.timeout ?? 300);
if (!(timeoutSeconds > 0)) fail(`--timeout must be a positive number, got "${values.timeout}"`);

const identities = Array.from({ length: nodes }, (_, index) => `node${index + 1}.realfleet.example.net`);
const started = Date.now();
const provisioned = await provisionedFleet({
  identities,
  protocolV2: protocol === "2",
  features: features as FeatureName[],
  deployments: values.standby ? ["primary", "standby"] : ["primary"],
  ...(ours ? { stack: ours } : {}),
});
let stopping = false;
let goDaemon: ChildProcess | undefined;
const stop = async (code: number) => {
  if (stopping) return;
  stopping = true;
  goDaemon?.kill("SIGTERM");
  await provisioned.stop();
  process.exit(code);
};
process.once("SIGINT", () => void stop(130));
process.once("SIGTERM", () => void stop(143));

process.stdout.write(
  `${nodes} go-choria ${provisioned.fleet.build.version} servers (protocol v${protocol}, ${features.join("+")}) ` +
    `provisioning broker ${provisioned.fleet.provisioningBroker.url}, target ${provisioned.fleet.targetBroker.url} (choria broker, TLS)\n`,
);
await provisioned.fleet.startAll();
const provisioningStarted = Date.now();
if (goProvisioner === undefined) {
  provisioned.stack.start();
} else {
  // The stack stays idle; the Go daemon joins the same broker as user provisioner with the password.
  const files = await goProvisionerFiles(provisioned.fleet, { features: features as FeatureName[], workers: goWorkers, dir: await mkdtemp(join(provisioned.fleet.dir, "go-provisioner-")) });
  goDaemon = spawn("setpriv", ["--pdeathsig", "TERM", "--", goProvisioner, "run", "--config", files.configFile, "--choria-config", files.choriaConfigFile], {
    env: { ...process.env, ...files.env },
    stdio: "ignore",
  });
  process.stdout.write(`the Go provisioner runs with ${files.configFile} (log ${join(dirname(files.configFile), "provisioner.log")})\n`);
}
let ok = true;
try {
  await waitForArrivals(provisioned, identities, timeoutSeconds * 1000);
} catch (error) {
  ok = false;
  process.stdout.write(`${String((error as Error).message)}\n`);
}
const arrived = provisioned.targetEvents.identities("startup");
for (const node of provisioned.fleet.nodes.values()) {
  const actions = await provisioningActions(node);
  const onTarget = arrived.has(node.identity);
  process.stdout.write(`  ${node.identity}: configured ${actions.configured}x, restarted ${actions.restarted}x, ${onTarget ? "on" : "NOT on"} the target broker\n`);
  if (!onTarget) process.stdout.write(`    last lines of its log:\n${(await node.log()).split("\n").slice(-15).map((line) => `    ${line}`).join("\n")}\n`);
}
if (arrived.size < nodes) {
  const problems = provisioned.logs.records.filter((record) => record.level !== "info").slice(-20);
  process.stdout.write(`the stack's last ${problems.length} warnings and errors:\n`);
  for (const record of problems) process.stdout.write(`  ${record.level} ${record.message} ${JSON.stringify(record.attributes ?? {})}\n`);
}
const provisioningSeconds = (Date.now() - provisioningStarted) / 1000;
const memory = await fleetMemory(provisioned.fleet);
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
process.stdout.write(
  `${arrived.size}/${nodes} provisioned in ${provisioningSeconds.toFixed(1)} s from the ${goProvisioner === undefined ? "stack's" : "Go provisioner's"} start ` +
    `(${((Date.now() - started) / 1000).toFixed(1)} s with fleet setup); memory (PSS / RSS): nodes ` +
    `${mib(memory.nodes.pssBytes)} / ${mib(memory.nodes.rssBytes)} MiB (${mib(memory.perNode.pssBytes)} / ${mib(memory.perNode.rssBytes)} MiB each), ` +
    `brokers ${mib(memory.brokers.pssBytes)} / ${mib(memory.brokers.rssBytes)} MiB\n`,
);

// What the site's administrator gets: a ping reply and an authorized inventory from every node.
const admin = await provisioned.fleet.adminClient();
const ping = await admin.choria(["ping"]);
const pongs = ping.stdout.split("\n").filter((line) => /^\S+\s+time=\d+/.test(line.trim())).length;
const inventory = await admin.choria(["req", "rpcutil", "inventory", "--json"]);
let authorized = 0;
try {
  const replies = (JSON.parse(inventory.stdout) as { replies: Array<{ statuscode: number }> }).replies;
  authorized = replies.filter((reply) => reply.statuscode === 0).length;
} catch {
  process.stdout.write(`rpcutil inventory gave no JSON: ${inventory.stdout.slice(0, 500)}${inventory.stderr.slice(0, 500)}\n`);
}
process.stdout.write(`admin ${admin.callerId}: ${pongs}/${nodes} ping replies, ${authorized}/${nodes} authorized rpcutil inventory replies\n`);
if (pongs !== nodes || authorized !== nodes) ok = false;
await stop(ok ? 0 : 1);
