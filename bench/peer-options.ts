/**
 * bench/peer.ts's options: command-line flags, each with the environment variable it replaces as
 * its default (the variables stay for scripts that set them). `--help` prints this and the run
 * starts nothing.
 */
import { decimalNumber, parsedOptions, readWholeNumbers, reportDirOf, UsageError, valueOf, wholeNumber } from "./command";
import type { HelperKind } from "./peer-summary";

export interface OursSetting {
  maxConcurrency: number;
  workers: number;
}

export interface PeerOptions {
  help: boolean;
  markdownOnly: boolean;
  /** Where peer.json, peer.md and pipeline-stages.md are read and written (--report-dir, default reports/). */
  reportDir: string;
  sizes: number[];
  /** Go's `workers` in every Go run (its best in earlier sweeps: 256). */
  goWorkers: number;
  /** Ours' tuned provision concurrency x workers, run as pairs of its own beside the default ones. */
  tuned: OursSetting | undefined;
  /** Alternated Go/ours pairs per size, helper and config. */
  pairs: number;
  helpers: HelperKind[];
  profile: boolean;
  /** Nodes of the unmeasured warm-up (Go then ours) before the first measured run; 0: none. */
  warmUpNodes: number;
  /** Per-run bound in seconds; undefined: max(180, 120 + 0.1 per node). */
  timeoutS: number | undefined;
  /** How long to wait before each run for the 1-minute load to fall below maxStartLoad. */
  loadWaitS: number;
  /** A run starting with the 1-minute load above this refuses its pair. */
  maxStartLoad: number;
  /** A run with more CPU steal (%) than this refuses its pair. */
  maxSteal: number;
  /** Added to every DynamoDB request of ours (a delaying proxy in the benchmark's process). */
  storeDelayMs: number;
  /** Only ours once on a fleet of this many nodes, merged into the recorded peer.json as `no_cliff`. */
  noCliffNodes: number | undefined;
  /** Heading of this run's section in pipeline-stages.md. */
  label: string | undefined;
  /** Real go-choria servers per real-fleet run; 0: the real fleet is not run. */
  realFleetNodes: number;
  /** Runs per side on the real fleet, alternated. */
  realFleetRounds: number;
  /** Only the real-fleet runs, merged into the recorded peer.json. */
  realFleetOnly: boolean;
  /** Both sides' processes on one CPU, the stand-ins for AWS's services (and the benchmark) on another. */
  standInsApart: boolean;
}

export const PEER_USAGE = `Usage: npm run bench:peer -- [options]

Runs the Go provisioner and this project side by side on fresh simulated fleets and writes
peer.json and peer.md in the report directory (--report-dir, default reports/). Per fleet size,
helper and config it runs alternated pairs (pair 1 Go then ours, pair 2 ours then Go, ...); a pair's
ratio is ours' hosts/min over Go's and a fleet's figure is the median over its counted pairs (at
least 3). Before each run it waits for the 1-minute load to fall below --max-start-load; a pair with
a run that started above it, or with CPU steal above --max-steal over a run, is refused and run
again (at most 2 more times); a pair where a side did not restart every node is not counted.

Options (environment variable in brackets):
  --sizes <n,n>             fleet sizes [PEER_SIZES, default 1000,5000]
  --pairs <n>               alternated pairs per size, helper and config [PEER_PAIRS, default 3]
  --go-workers <n>          Go \`workers\` in every Go run [PEER_GO_WORKERS, default 256]
  --tuned <CxW>             also run pairs with ours at provision concurrency C x workers W (config "tuned");
                            without it only the product's defaults (10 x 10, no config overrides) run
  --helpers <list>          bash (bash + jq) and/or compiled (Go, built here) [PEER_HELPERS, default bash,compiled]
  --no-profile              skip the profiled run of ours after the pairs [PEER_PROFILE=false]
  --warm-up <nodes>         one unmeasured run of each side (Go, then ours) first, 0 for none [PEER_WARM_UP_NODES, default 200]
  --timeout <s>             per-run bound [PEER_TIMEOUT_S, default max(180, 120 + 0.1 s per node)]
  --load-wait <s>           wait up to this long before each run for the load to fall below the gate [PEER_LOAD_WAIT_S, default 120]
  --max-start-load <n>      start gate: the 1-minute load a run may start at [PEER_MAX_START_LOAD, default 1.5]
  --max-steal <pct>         CPU steal % over a run above which its pair is refused [PEER_MAX_STEAL, default 3]
  --store-delay-ms <ms>     added to every DynamoDB request of ours, by a proxy in the benchmark's process [default 0]
  --no-cliff <nodes>        only ours (default config, compiled helper) once on this many nodes; merged into the
                            recorded peer.json as no_cliff (admission timeline, longest gap)
  --label <text>            heading of this run's per-stage section appended to pipeline-stages.md [default the commit]
  --real-fleet <nodes>      real go-choria servers per run on the real fleet (root, Go), 0 to skip [PEER_REAL_FLEET_NODES, default 50]
  --real-fleet-rounds <n>   runs per side on the real fleet [PEER_REAL_FLEET_ROUNDS, default 3]
  --real-fleet-only         run only the real fleet and merge it into the recorded peer.json
  --stand-ins-apart         both sides' processes (provisioner, helpers, fleet, nats-server) on CPU 0, and DynamoDB
                            Local, fauxqs and the benchmark on CPU 1, as on AWS where those services are not on
                            the provisioner's machine; the simulator pairs only (with --real-fleet 0)
  --markdown-only           rewrite peer.md and the fleet summaries in peer.json from its pairs, and exit
  --report-dir <dir>        where peer.json and peer.md are written, pipeline-stages.md appended to, and the
                            recorded peer.json read; relative to the repository root [default reports]
  --help                    print this and exit
`;

const COMMAND = "bench:peer";

/** One `<concurrency>x<workers>` pair, both whole numbers of at least 1; a malformed one is a usage mistake of `command` (scripts/realfleet.ts takes one too, as --ours). */
export function oursSetting(command: string, option: string, pair: string): OursSetting {
  const [concurrency, workers] = pair.split("x").map(Number);
  if (!Number.isInteger(concurrency) || !Number.isInteger(workers) || concurrency === undefined || workers === undefined || concurrency < 1 || workers < 1) {
    throw new UsageError(`${command}: ${option} takes <concurrency>x<workers> such as 10x10, not ${pair}`);
  }
  return { maxConcurrency: concurrency, workers };
}

function helpers(name: string, text: string | undefined): HelperKind[] {
  const kinds = (text ?? "bash,compiled").split(",").map((part) => part.trim());
  for (const kind of kinds) if (kind !== "bash" && kind !== "compiled") throw new UsageError(`${COMMAND}: ${name} takes bash and/or compiled, not ${kind}`);
  return kinds as HelperKind[];
}

const FLAGS = {
  help: { type: "boolean", short: "h" },
  "markdown-only": { type: "boolean" },
  "report-dir": { type: "string" },
  sizes: { type: "string" },
  pairs: { type: "string" },
  "go-workers": { type: "string" },
  tuned: { type: "string" },
  helpers: { type: "string" },
  "no-profile": { type: "boolean" },
  "warm-up": { type: "string" },
  timeout: { type: "string" },
  "load-wait": { type: "string" },
  "max-start-load": { type: "string" },
  "max-steal": { type: "string" },
  "store-delay-ms": { type: "string" },
  "no-cliff": { type: "string" },
  label: { type: "string" },
  "real-fleet": { type: "string" },
  "real-fleet-rounds": { type: "string" },
  "real-fleet-only": { type: "boolean" },
  "stand-ins-apart": { type: "boolean" },
} as const;

/** The options from `argv`, each flag falling back on its environment variable in `env`; a mistake in either is a UsageError naming it. */
export function parsePeerOptions(argv: readonly string[], env: Record<string, string | undefined> = process.env): PeerOptions {
  const parsed = parsedOptions(COMMAND, FLAGS, [...argv]);
  // The flag when given, else its variable: a mistake names the one the value came from.
  const given = (flag: string, text: string | undefined, variable?: string): [string, string | undefined] =>
    text !== undefined || variable === undefined ? [flag, text] : [variable, env[variable]];
  const whole = (flag: string, text: string | undefined, variable: string | undefined, fallback: number, least = 1) => wholeNumber(COMMAND, ...given(flag, text, variable), fallback, least);
  const decimal = (flag: string, text: string | undefined, variable: string, fallback: number) => decimalNumber(COMMAND, ...given(flag, text, variable), fallback);
  const timeout = given("--timeout", parsed.timeout, "PEER_TIMEOUT_S");
  const options: PeerOptions = {
    help: parsed.help ?? false,
    markdownOnly: parsed["markdown-only"] ?? false,
    reportDir: reportDirOf(parsed["report-dir"]),
    sizes: valueOf(COMMAND, readWholeNumbers(...given("--sizes", parsed.sizes, "PEER_SIZES"), [1_000, 5_000])),
    pairs: whole("--pairs", parsed.pairs, "PEER_PAIRS", 3),
    goWorkers: whole("--go-workers", parsed["go-workers"], "PEER_GO_WORKERS", 256),
    tuned: parsed.tuned === undefined ? undefined : oursSetting(COMMAND, "--tuned", parsed.tuned),
    helpers: helpers(...given("--helpers", parsed.helpers, "PEER_HELPERS")),
    profile: !(parsed["no-profile"] ?? env.PEER_PROFILE === "false"),
    warmUpNodes: whole("--warm-up", parsed["warm-up"], "PEER_WARM_UP_NODES", 200, 0),
    timeoutS: timeout[1] === undefined ? undefined : decimalNumber(COMMAND, ...timeout, 0),
    loadWaitS: decimal("--load-wait", parsed["load-wait"], "PEER_LOAD_WAIT_S", 120),
    maxStartLoad: decimal("--max-start-load", parsed["max-start-load"], "PEER_MAX_START_LOAD", 1.5),
    maxSteal: decimal("--max-steal", parsed["max-steal"], "PEER_MAX_STEAL", 3),
    storeDelayMs: whole("--store-delay-ms", parsed["store-delay-ms"], undefined, 0, 0),
    noCliffNodes: parsed["no-cliff"] === undefined ? undefined : whole("--no-cliff", parsed["no-cliff"], undefined, 0),
    label: parsed.label,
    realFleetNodes: whole("--real-fleet", parsed["real-fleet"], "PEER_REAL_FLEET_NODES", 50, 0),
    realFleetRounds: whole("--real-fleet-rounds", parsed["real-fleet-rounds"], "PEER_REAL_FLEET_ROUNDS", 3),
    realFleetOnly: parsed["real-fleet-only"] ?? false,
    standInsApart: parsed["stand-ins-apart"] ?? false,
  };
  if (options.realFleetOnly && options.realFleetNodes === 0) throw new UsageError(`${COMMAND}: --real-fleet-only needs --real-fleet above 0`);
  if (options.realFleetOnly && options.noCliffNodes !== undefined) throw new UsageError(`${COMMAND}: --no-cliff and --real-fleet-only are separate runs: give one`);
  if (options.standInsApart && (options.realFleetNodes > 0 || options.noCliffNodes !== undefined)) {
    throw new UsageError(`${COMMAND}: --stand-ins-apart pins the simulator pairs only: give --real-fleet 0 and no --no-cliff`);
  }
  return options;
}
