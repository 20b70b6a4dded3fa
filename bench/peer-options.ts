/**
 * bench/peer.ts's options: command-line flags, each with the environment variable it replaces as
 * its default (the variables stay for scripts that set them). `--help` prints this and the run
 * starts nothing.
 */
import { parseArgs } from "node:util";
import type { HelperKind } from "./peer-summary";

export interface PeerOptions {
  help: boolean;
  markdownOnly: boolean;
  sizes: number[];
  goWorkers: number[];
  oursSettings: Array<{ maxConcurrency: number; workers: number }>;
  helpers: HelperKind[];
  profile: boolean;
  warmUpNodes: number;
  /** Per-run bound in seconds; undefined: max(180, 120 + 0.1 per node). */
  timeoutS: number | undefined;
  /** How long to wait before each run for the 1-minute load to fall to the core count. */
  loadWaitS: number;
  /** Heading of this run's section in reports/pipeline-stages.md. */
  label: string | undefined;
  /** Real go-choria servers per real-fleet run; 0: the real fleet is not run. */
  realFleetNodes: number;
  /** Runs per side on the real fleet, alternated. */
  realFleetRounds: number;
  /** Only the real-fleet runs, merged into the recorded reports/peer.json. */
  realFleetOnly: boolean;
}

export const PEER_USAGE = `Usage: npm run bench:peer -- [options]

Runs the Go provisioner and this project side by side on fresh simulated fleets and writes
reports/peer.json and reports/peer.md. Each run records the 1-minute load average at its start and
every 5 s through it; a ratio is only reported between runs that both started at or below the core
count and both restarted every node.

Options (environment variable in brackets):
  --sizes <n,n>             fleet sizes; the sweep runs at the first [PEER_SIZES, default 1000,5000]
  --go-workers <n,n>        Go \`workers\` swept [PEER_GO_WORKERS, default 64,256,512]
  --ours <CxW,CxW>          ours provision concurrency x workers swept [PEER_OURS_SETTINGS, default 10x10,20x10,20x20]
  --helpers <list>          bash (bash + jq) and/or compiled (Go, built here) [PEER_HELPERS, default bash,compiled]
  --no-profile              skip the profiled run of ours [PEER_PROFILE=false]
  --warm-up <nodes>         unmeasured first run of ours, 0 for none [PEER_WARM_UP_NODES, default 200]
  --timeout <s>             per-run bound [PEER_TIMEOUT_S, default max(180, 120 + 0.1 s per node)]
  --load-wait <s>           wait up to this long before each run for the load to fall to the core count [PEER_LOAD_WAIT_S, default 60]
  --label <text>            heading of this run's per-stage section appended to reports/pipeline-stages.md [default the commit]
  --real-fleet <nodes>      real go-choria servers per run on the real fleet (root, Go), 0 to skip [PEER_REAL_FLEET_NODES, default 50]
  --real-fleet-rounds <n>   runs per side on the real fleet [PEER_REAL_FLEET_ROUNDS, default 3]
  --real-fleet-only         run only the real fleet and merge it into the recorded reports/peer.json
  --markdown-only           rewrite reports/peer.md and the fleet summaries in reports/peer.json from its runs, and exit
  --help                    print this and exit
`;

export class PeerOptionsError extends Error {}

function numbers(text: string, name: string): number[] {
  const values = text.split(",").map((part) => Number(part.trim()));
  if (values.some((value) => !Number.isInteger(value) || value <= 0)) throw new PeerOptionsError(`${name} takes positive integers separated by commas, got "${text}"`);
  return values;
}

/** One `<concurrency>x<workers>` pair, both whole numbers of at least 1 (scripts/realfleet.ts takes one too). */
export function oursSetting(pair: string): { maxConcurrency: number; workers: number } {
  const [concurrency, workers] = pair.split("x").map(Number);
  if (!Number.isInteger(concurrency) || !Number.isInteger(workers) || concurrency === undefined || workers === undefined || concurrency < 1 || workers < 1) {
    throw new PeerOptionsError(`--ours takes <concurrency>x<workers> pairs such as 10x10, got "${pair}"`);
  }
  return { maxConcurrency: concurrency, workers };
}

function settings(text: string): PeerOptions["oursSettings"] {
  return text.split(",").map(oursSetting);
}

function helpers(text: string): HelperKind[] {
  const kinds = text.split(",").map((part) => part.trim());
  for (const kind of kinds) if (kind !== "bash" && kind !== "compiled") throw new PeerOptionsError(`--helpers takes bash and/or compiled, got "${kind}"`);
  return kinds as HelperKind[];
}

function positive(text: string, name: string): number {
  const value = wholeNumber(text, name);
  if (value === 0) throw new PeerOptionsError(`${name} takes a whole number > 0, got "${text}"`);
  return value;
}

function wholeNumber(text: string, name: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) throw new PeerOptionsError(`${name} takes a whole number >= 0, got "${text}"`);
  return value;
}

function seconds(text: string, name: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) throw new PeerOptionsError(`${name} takes seconds (a number >= 0), got "${text}"`);
  return value;
}

export function parsePeerOptions(argv: readonly string[], env: Record<string, string | undefined> = process.env): PeerOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        help: { type: "boolean", short: "h" },
        "markdown-only": { type: "boolean" },
        sizes: { type: "string" },
        "go-workers": { type: "string" },
        ours: { type: "string" },
        helpers: { type: "string" },
        "no-profile": { type: "boolean" },
        "warm-up": { type: "string" },
        timeout: { type: "string" },
        "load-wait": { type: "string" },
        label: { type: "string" },
        "real-fleet": { type: "string" },
        "real-fleet-rounds": { type: "string" },
        "real-fleet-only": { type: "boolean" },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw new PeerOptionsError(error instanceof Error ? error.message : String(error), { cause: error });
  }
  const timeout = parsed.timeout ?? env.PEER_TIMEOUT_S;
  const options: PeerOptions = {
    help: parsed.help ?? false,
    markdownOnly: parsed["markdown-only"] ?? false,
    sizes: numbers(parsed.sizes ?? env.PEER_SIZES ?? "1000,5000", "--sizes"),
    goWorkers: numbers(parsed["go-workers"] ?? env.PEER_GO_WORKERS ?? "64,256,512", "--go-workers"),
    oursSettings: settings(parsed.ours ?? env.PEER_OURS_SETTINGS ?? "10x10,20x10,20x20"),
    helpers: helpers(parsed.helpers ?? env.PEER_HELPERS ?? "bash,compiled"),
    profile: !(parsed["no-profile"] ?? env.PEER_PROFILE === "false"),
    warmUpNodes: seconds(parsed["warm-up"] ?? env.PEER_WARM_UP_NODES ?? "200", "--warm-up"),
    timeoutS: timeout === undefined ? undefined : seconds(timeout, "--timeout"),
    loadWaitS: seconds(parsed["load-wait"] ?? env.PEER_LOAD_WAIT_S ?? "60", "--load-wait"),
    label: parsed.label,
    realFleetNodes: wholeNumber(parsed["real-fleet"] ?? env.PEER_REAL_FLEET_NODES ?? "50", "--real-fleet"),
    realFleetRounds: positive(parsed["real-fleet-rounds"] ?? env.PEER_REAL_FLEET_ROUNDS ?? "3", "--real-fleet-rounds"),
    realFleetOnly: parsed["real-fleet-only"] ?? false,
  };
  if (options.realFleetOnly && options.realFleetNodes === 0) throw new PeerOptionsError("--real-fleet-only needs --real-fleet above 0");
  return options;
}
