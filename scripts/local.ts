/**
 * `npm run local`: the provisioner end to end on this machine. Starts nats-server, DynamoDB Local
 * and fauxqs, a simulated fleet, and runs the real handlers under an emulated Lambda (schedules and
 * SQS event sources), showing live progress until every node is provisioned or the timeout passes.
 * Exits 0 only when every node was provisioned. See docs/local-run.md.
 */
// First: EMF off before any function module builds its Powertools instances (see the module).
import "../dev/local/quiet-powertools";
import { createWriteStream, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createConsoleLogger } from "../dev/local/console-logger";
import type { Logger } from "../lib/ports/logger";
import { formatLifecycleEvents, formatSummary, createProgressWriter, type ProgressWriter } from "../dev/local/progress";
import { runLocal, type RunSummary } from "../dev/local/run";
import { startLocalStack, type FeatureName, type HelperChoice, type LocalStack, type LocalStackOptions } from "../dev/local/stack";
import { dynamoDbSplit } from "../dev/local/request-counter";
import { exportLines } from "../dev/local/shell";
import { ensurePrerequisites, MissingPrerequisiteError } from "../dev/local/prerequisites";
import { ServiceStartError } from "../dev/local/services";
import { watchStopSignals } from "../dev/local/stop-signals";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const USAGE = `Usage: npm run local -- [options]

  --nodes N                 simulated nodes (default 100)
  --features LIST           comma list of jwt, ed25519, pki, or "none" (default jwt,ed25519)
  --helper NAME|CMD         node (default), bash, inline, or a helper command line
  --standby                 run a second (standby) deployment
  --kill-leader-after S     crash the leading deployment after S seconds (needs --standby to fail over)
  --fast                    short schedules and retries, lease 30s/2s/1s, for demos; not AWS timings
  --timeout S               give up after S seconds (default 300 with --fast, else 600)
  --workers N               hosts one provision invocation works on at once (default 10)
  --batch-size N            host-work records per provision invocation (default serverless.yml's 10)
  --concurrency N           concurrent provision invocations per deployment (default serverless.yml's 10, --fast 5)
  --log-level LEVEL         debug, info, warn, error (default info); logs go to a file
  --verbose                 also print the logs on stderr
  --plain                   plain progress lines even on a terminal
  --keep-running            after the run, print the primary deployment's environment as export
                            lines (for scripts/sls-local.sh / sls invoke local) and stay up until Ctrl-C
  --help
`;

function fail(message: string): never {
  process.stderr.write(`npm run local: ${message} (see npm run local -- --help)\n`);
  process.exit(2);
}

function positive(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) fail(`--${name} must be a positive number, got "${text}"`);
  return value;
}

function parseFeatures(text: string | undefined): FeatureName[] {
  if (text === undefined) return ["jwt", "ed25519"];
  if (text === "none" || text === "") return [];
  const features = text.split(",").map((item) => item.trim());
  for (const feature of features) if (!["jwt", "ed25519", "pki"].includes(feature)) fail(`unknown feature "${feature}"`);
  return features as FeatureName[];
}

function parseHelper(text: string | undefined): HelperChoice {
  if (text === undefined) return "node";
  if (text === "node" || text === "bash" || text === "inline") return text;
  return { command: text };
}

type CommandLine = Record<string, string | boolean | undefined>;

function parseCommandLine(): CommandLine {
  try {
    return parseArgs({
      options: {
        nodes: { type: "string" },
        features: { type: "string" },
        helper: { type: "string" },
        standby: { type: "boolean" },
        "kill-leader-after": { type: "string" },
        fast: { type: "boolean" },
        timeout: { type: "string" },
        workers: { type: "string" },
        "batch-size": { type: "string" },
        concurrency: { type: "string" },
        "log-level": { type: "string" },
        verbose: { type: "boolean" },
        plain: { type: "boolean" },
        "keep-running": { type: "boolean" },
        help: { type: "boolean" },
      },
      strict: true,
    }).values;
  } catch (error) {
    fail((error as Error).message);
  }
}

const stringOption = (values: CommandLine, name: string) => values[name] as string | undefined;

type LogLevel = "debug" | "info" | "warn" | "error";

/** The options checked before anything starts; the stack's own are checked as it starts (stackOptions). */
function checkedOptions(values: CommandLine) {
  const fast = values.fast === true;
  const nodes = Math.trunc(positive("nodes", stringOption(values, "nodes"), 100));
  const timeoutMs = positive("timeout", stringOption(values, "timeout"), fast ? 300 : 600) * 1000;
  const killAfter = stringOption(values, "kill-leader-after");
  const killLeaderAfterMs = killAfter === undefined ? undefined : positive("kill-leader-after", killAfter, 1) * 1000;
  const logLevel = (stringOption(values, "log-level") ?? "info") as LogLevel;
  if (!["debug", "info", "warn", "error"].includes(logLevel)) fail(`--log-level must be debug, info, warn or error`);
  // Without a standby nothing takes over: the run would only wait out its timeout and prove nothing.
  if (killLeaderAfterMs !== undefined && !values.standby) fail("--kill-leader-after needs --standby: with one deployment nothing can take over");
  return { fast, nodes, timeoutMs, killLeaderAfterMs, logLevel, helper: parseHelper(stringOption(values, "helper")) };
}

type CheckedOptions = ReturnType<typeof checkedOptions>;

function stackOptions(values: CommandLine, run: CheckedOptions, logger: Logger): LocalStackOptions {
  const batchSize = stringOption(values, "batch-size");
  const concurrency = stringOption(values, "concurrency");
  return {
    nodes: run.nodes,
    features: parseFeatures(stringOption(values, "features")),
    helper: run.helper,
    deployments: values.standby ? ["primary", "standby"] : ["primary"],
    fast: run.fast,
    workers: Math.trunc(positive("workers", stringOption(values, "workers"), 10)),
    // Unset, the stack's own: serverless.yml's, or --fast's.
    ...(batchSize === undefined ? {} : { batchSize: Math.trunc(positive("batch-size", batchSize, 0)) }),
    ...(concurrency === undefined ? {} : { maxConcurrency: Math.trunc(positive("concurrency", concurrency, 0)) }),
    logger,
  };
}

/** The orderly stop on a signal: summary, then every service, the fleet and the work dir with the key files. */
function stopOnSignals(progress: ProgressWriter): AbortSignal {
  const interrupt = new AbortController();
  watchStopSignals({
    onStop: (why) => {
      progress.event(`${why}: stopping everything (Ctrl-C again to force)`);
      interrupt.abort();
    },
    onForce: (why) => {
      progress.event(`${why} again: forcing the exit`);
      process.exit(130);
    },
  });
  return interrupt.signal;
}

/** The run's log file (and stderr with --verbose); `close` ends the file. */
function openLog(level: LogLevel, verbose: boolean) {
  const path = join(tmpdir(), `choria-local-${process.pid}-${Date.now()}.log`);
  const file = createWriteStream(path);
  // The keeper and bridge loops a stop does not wait for may still log; a write after the end would throw.
  let open = true;
  const logger = createConsoleLogger({
    level,
    serviceName: "choria-provisioner-local",
    write: (line) => {
      if (open) file.write(`${line}\n`);
      if (verbose) process.stderr.write(`${line}\n`);
    },
  });
  const close = async () => {
    open = false;
    await new Promise<void>((resolve) => file.end(resolve));
  };
  return { path, logger, close };
}

/**
 * A forced stop (a second signal) exits at once: never leave the servers or the key files behind.
 * Call the returned function once the stack has stopped them itself.
 */
function killServicesOnExit(stack: LocalStack): () => void {
  let servicesStopped = false;
  process.on("exit", () => {
    if (servicesStopped) return;
    for (const pid of [stack.nats.pid, stack.dynamoDb.pid]) {
      try {
        if (pid !== undefined) process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    rmSync(stack.workDir, { recursive: true, force: true });
  });
  return () => {
    servicesStopped = true;
  };
}

async function writeSummary(stack: LocalStack, summary: RunSummary, logPath: string): Promise<void> {
  const dynamo = dynamoDbSplit(stack.traffic.dynamoDb.operations);
  const sqsMessages = [...stack.traffic.sqsApp.messagesSent.values()].reduce((a, b) => a + b, 0);
  const events = await stack.lifecycleEvents();
  process.stdout.write(
    `${formatSummary(summary, [
      ["DynamoDB writes/reads (app)", `${dynamo.writes} / ${dynamo.reads}`],
      ["SQS requests (app / event sources)", `${stack.traffic.sqsApp.total()} / ${stack.traffic.sqsEventSources.total()}`],
      ["SQS messages sent (app)", String(sqsMessages)],
      ["startup events", formatLifecycleEvents(events)],
      ["logs", logPath],
    ])}\n`,
  );
}

/** `--keep-running`: prints the primary deployment's environment and waits for Ctrl-C. */
async function keepRunning(stack: LocalStack, interrupt: AbortSignal): Promise<void> {
  const primary = stack.deployments[0];
  process.stdout.write("\nThe stack stays up until Ctrl-C. For sls invoke local (scripts/sls-local.sh), run:\n");
  process.stdout.write(exportLines(primary?.env ?? {}));
  await new Promise((resolve) => interrupt.addEventListener("abort", resolve, { once: true }));
}

async function main(): Promise<number> {
  const values = parseCommandLine();
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const run = checkedOptions(values);

  const progress = createProgressWriter({ plain: values.plain === true });
  await ensurePrerequisites({ jq: run.helper === "bash", say: (message) => progress.event(message) });
  const interrupt = stopOnSignals(progress);

  progress.event(`starting nats-server, DynamoDB Local, fauxqs and ${run.nodes} simulated nodes${run.fast ? " (fast mode)" : ""}`);
  const log = openLog(run.logLevel, values.verbose === true);
  const stack = await startLocalStack(stackOptions(values, run, log.logger));
  const servicesStopped = killServicesOnExit(stack);
  progress.event(
    `services up: nats ${stack.nats.url}, DynamoDB ${stack.dynamoDb.url}, SQS ${stack.sqs.url}; deployments ${stack.deployments
      .map((d) => d.id)
      .join(", ")}; work dir ${stack.workDir}; logs in ${log.path}`,
  );

  try {
    const summary = await runLocal(stack, {
      timeoutMs: run.timeoutMs,
      ...(run.killLeaderAfterMs === undefined ? {} : { killLeaderAfterMs: run.killLeaderAfterMs }),
      signal: interrupt,
      onSnapshot: (snapshot) => progress.snapshot(snapshot),
      onEvent: (message) => progress.event(message),
    });
    progress.finish();
    await writeSummary(stack, summary, log.path);
    const code = summary.provisioned === summary.total ? 0 : 1;
    if (values["keep-running"] && !interrupt.aborted) {
      await keepRunning(stack, interrupt);
      return code;
    }
    return interrupt.aborted ? 130 : code;
  } finally {
    progress.finish();
    // Each step named as it begins, so a stop that takes long says what it waits for.
    const stopping = Date.now();
    await stack.stop((what) => progress.status(`stopping: ${what}`));
    servicesStopped();
    progress.event(`stopped everything the run started in ${((Date.now() - stopping) / 1000).toFixed(1)} s`);
    await log.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    // What the machine lacks, or a service that did not start, is the user's to fix: one line, no stack.
    if (error instanceof MissingPrerequisiteError || error instanceof ServiceStartError) {
      process.stderr.write(`npm run local: ${error.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`local run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
