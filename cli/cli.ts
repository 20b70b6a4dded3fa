/**
 * `choria-provisioner`: the operator CLI, an adapter over lib/app/operator.ts. It finds the
 * deployment's tables and queues by the names serverless.yml gives them (from `--stage`), or from
 * flags, or from the environment the functions get (LEASE_TABLE, HOST_WORK_QUEUE_URL, ... as
 * scripts/local-services.ts and `npm run local -- --keep-running` print them), checks they exist,
 * and prints tables for people or JSON (`--json`) for scripts. See docs/operations.md.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { describeAwsError, openOperator, type OperatorStack, type StackNeeds } from "../lib/aws/operator-stack";
import { renewSettingsOf } from "../lib/config/renew-capacity";
import { messageOf, ProvisionerError, StackNotFoundError } from "../lib/errors";
import { stageResourceNames } from "../lib/aws/stage-resources";
import { systemClock, type Clock } from "../lib/ports";
import { parseDuration } from "../lib/config/duration";
import {
  OPERATOR_TIMING_DEFAULTS,
  OperatorRefusal,
  type DeadLetterView,
  type ElectionView,
  type OperatorStatus,
  type PauseResult,
  type ReadmitResult,
} from "../lib/app/operator";

const ELECTION_HELP = `  election view | info        the site's lease and every deployment known to it (leader, standby, paused)
`;
const DLQ_HELP = `  dlq list                    host-work dead letters: host, term, step, failures, reason
  dlq requeue (--all | <identity>...)
                              admit dead-lettered hosts again under the current term, removing each one's
                              dead letters as soon as its work is queued
`;
import { formatRenewalReport, RENEW_OPTIONS, RENEW_USAGE, RenewUsageError, runRenew } from "./renew";
import { MERGE_OPTIONS, MergeUsageError, REGISTRY_HELP, runRegistryMerge } from "./registry-merge";

const USAGE = `Usage: choria-provisioner <command> [options]

Commands:
  status                      leader, term, lease expiry, pause switch, queue depths, registry counts, last errors
${ELECTION_HELP}${DLQ_HELP}  pause [--reason TEXT] [--force]
                              this deployment stops working and stops contesting the lease (--force: also a
                              deployment the site does not know yet)
  resume                      undo pause
  reprovision <identity>... [--force]
                              admit hosts for provisioning now under the current term (overrides the
                              once-per-interval rule). It does not send a configured node back to
                              provisioning mode; hosts the registry does not know or has just provisioned
                              are refused unless --force

${RENEW_USAGE}${REGISTRY_HELP}
Where the deployment is (flags win over the environment):
  --stage NAME                names as serverless.yml makes them: choria-provisioner-<stage>-lease, ...-host-work, ...
                              (env SLS_STAGE, SLS_LOCAL_STAGE; default dev)
  --site NAME                 the Choria site (env PROVISIONER_SITE, else \`site\` of the provisioner config)
  --deployment ID             this deployment's id (env PROVISIONER_DEPLOYMENT_ID, else \`deployment_id\` of the
                              config, else AWS_REGION, else local: the provisioner's own default)
  --config FILE               provisioner YAML to read site and deployment_id from (env PROVISIONER_CONFIG,
                              PROVISIONER_CONFIG_YAML)
  --lease-table NAME          env LEASE_TABLE
  --admission-table NAME      env ADMISSION_TABLE
  --host-work-queue URL|NAME  env HOST_WORK_QUEUE_URL      --host-work-dlq URL|NAME   env HOST_WORK_DLQ_URL
  --lifecycle-queue URL|NAME  env LIFECYCLE_QUEUE_URL      --lifecycle-dlq URL|NAME   env LIFECYCLE_DLQ_URL
  --region REGION             env AWS_REGION, AWS_DEFAULT_REGION
  --dynamodb-endpoint URL     a local DynamoDB (env DYNAMODB_ENDPOINT); static local credentials are used
  --sqs-endpoint URL          a local SQS (env SQS_ENDPOINT)

Output:
  --json                      machine-readable output on stdout
  --by NAME                   who pauses or resumes (default $USER)
  --help
`;

/** What `choria-provisioner <group>` alone prints: the group's subcommands. */
const GROUP_HELP: Record<string, string> = {
  election: `Usage: choria-provisioner election <view|info> [options]\n\n${ELECTION_HELP}\nchoria-provisioner --help lists the options.\n`,
  dlq: `Usage: choria-provisioner dlq <list|requeue> [options]\n\n${DLQ_HELP}\nchoria-provisioner --help lists the options.\n`,
  registry: `Usage: choria-provisioner registry merge [options]\n\n${REGISTRY_HELP}\nchoria-provisioner --help lists the options.\n`,
};
/** Other names of a command, as the Choria CLI has them. */
const ALIASES: Record<string, string> = { "election info": "election view" };
const USAGE_HINT = `run "choria-provisioner --help" for the commands and options`;

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: Record<string, string | undefined>;
  clock?: Clock;
}

/** A usage mistake: exit code 2 with the usage text. */
class UsageError extends ProvisionerError {}
const OPTIONS = {
  stage: { type: "string" },
  site: { type: "string" },
  deployment: { type: "string" },
  config: { type: "string" },
  "lease-table": { type: "string" },
  "admission-table": { type: "string" },
  "host-work-queue": { type: "string" },
  "host-work-dlq": { type: "string" },
  "lifecycle-queue": { type: "string" },
  "lifecycle-dlq": { type: "string" },
  region: { type: "string" },
  "dynamodb-endpoint": { type: "string" },
  "sqs-endpoint": { type: "string" },
  json: { type: "boolean" },
  all: { type: "boolean" },
  reason: { type: "string" },
  by: { type: "string" },
  force: { type: "boolean" },
  help: { type: "boolean" },
  ...RENEW_OPTIONS,
  ...MERGE_OPTIONS,
} as const;

const parseCommandLine = (argv: readonly string[]) => parseArgs({ args: [...argv], allowPositionals: true, strict: true, options: OPTIONS });
type Values = ReturnType<typeof parseCommandLine>["values"];

/** What a command runs with: the opened stack, its options and arguments, and how to print. */
interface CommandRun {
  opened: Awaited<ReturnType<typeof openOperator>>;
  values: Values;
  args: readonly string[];
  env: CliIo["env"];
  now: number;
  print: (value: unknown, human: () => string) => void;
}

/** Each command: the tables and queues it opens, and what it does with them; returns the exit code. */
const COMMANDS: Record<string, { needs: StackNeeds; run(run: CommandRun): Promise<number> }> = {
  status: {
    needs: { tables: ["lease", "admission"], queues: ["hostWork", "hostWorkDlq", "lifecycle", "lifecycleDlq"] },
    async run({ opened, now, print }) {
      const status = await opened.operator.status();
      print(status, () => formatStatus(status, now));
      return 0;
    },
  },
  "election view": {
    needs: { tables: ["lease"], queues: [] },
    async run({ opened, print }) {
      const view = await opened.operator.electionView();
      print(view, () => formatElection(view));
      return 0;
    },
  },
  "dlq list": {
    needs: { tables: ["lease", "admission"], queues: ["hostWorkDlq"] },
    async run({ opened, now, print }) {
      const listing = await opened.operator.listDeadLetters();
      // JSON stays the list of letters scripts read; people also hear of letters in flight.
      print(listing.letters, () => formatDeadLetters(listing.letters, now, listing.inFlight));
      return 0;
    },
  },
  "dlq requeue": {
    needs: { tables: ["lease", "admission"], queues: ["hostWork", "hostWorkDlq"] },
    async run({ opened, values, args, print }) {
      if ((values.all === true) === (args.length > 0)) throw new UsageError("dlq requeue takes either --all or one or more identities");
      const result = await opened.operator.requeueDeadLetters(values.all ? {} : { identities: args });
      print(result, () => formatReadmit("requeue", result));
      return result.requeued.length > 0 || result.skipped.length === 0 ? 0 : 1;
    },
  },
  pause: { needs: { tables: ["lease"], queues: [] }, run: (run) => setPaused(run, true) },
  resume: { needs: { tables: ["lease"], queues: [] }, run: (run) => setPaused(run, false) },
  reprovision: {
    needs: { tables: ["lease", "admission"], queues: ["hostWork"] },
    async run({ opened, values, args, print }) {
      if (args.length === 0) throw new UsageError("reprovision needs one or more identities");
      const result = await opened.operator.reprovision(args, { force: values.force === true });
      print(result, () => formatReadmit("reprovision", result));
      return result.skipped.length === 0 ? 0 : 1;
    },
  },
  renew: {
    needs: { tables: ["lease", "admission"], queues: [] },
    run: ({ opened, values, args, env, print }) => runRenew(opened.renewal, values, args, print, env.USER ?? env.LOGNAME),
  },
  "registry merge": {
    // The merge finds its tables itself: the target may be an ARN in another Region.
    needs: { tables: [], queues: [] },
    run: ({ opened, values, args, print }) => runRegistryMerge(opened.registryMerge, values, args, print),
  },
};

async function setPaused({ opened, values, env, now, print }: CommandRun, paused: boolean): Promise<number> {
  const by = values.by ?? env.USER ?? env.LOGNAME;
  const state = await opened.operator.setPaused(paused, {
    ...(by ? { by } : {}),
    ...(values.reason ? { reason: values.reason } : {}),
    force: values.force === true,
  });
  print(state, () => (paused ? formatPause(state, now) : `resumed deployment ${state.deploymentId} of site "${state.site}": it contests the lease again at its next round.`));
  return 0;
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    io.stderr(`choria-provisioner: ${messageOf(error)}; ${USAGE_HINT}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const group = positionals[0] === undefined ? undefined : GROUP_HELP[positionals[0]];
  if (group && (positionals.length === 1 || values.help)) {
    io.stdout(group);
    return 0;
  }
  if (values.help || positionals.length === 0) {
    (values.help ? io.stdout : io.stderr)(USAGE);
    return values.help ? 0 : 2;
  }
  const twoWords = `${positionals[0]} ${positionals[1] ?? ""}`.trim();
  const named = ALIASES[twoWords] ?? twoWords;
  const name = COMMANDS[named] && positionals.length >= 2 ? named : (positionals[0] as string);
  const command = COMMANDS[name];
  let opened: Awaited<ReturnType<typeof openOperator>> | undefined;
  try {
    if (!command) {
      throw new UsageError(
        group ? `unknown ${positionals[0]} command "${positionals[1]}"` : `unknown command "${positionals.join(" ")}"`,
      );
    }
    const clock = io.clock ?? systemClock;
    opened = await openOperator(resolveStack(values, io.env), command.needs, clock);
    const json = values.json === true;
    const print = (value: unknown, human: () => string) => io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
    return await command.run({ opened, values, args: positionals.slice(name.split(" ").length), env: io.env, now: clock.now(), print });
  } catch (error) {
    if (error instanceof UsageError || error instanceof RenewUsageError || error instanceof MergeUsageError) {
      io.stderr(`choria-provisioner: ${error.message}; ${USAGE_HINT}\n`);
      return 2;
    }
    const refusal = error instanceof OperatorRefusal || error instanceof StackNotFoundError;
    io.stderr(`choria-provisioner: ${refusal ? error.message : describeAwsError(error)}\n`);
    return 1;
  } finally {
    opened?.close();
  }
}

// --- where the deployment is ---------------------------------------------------------------------

function resolveStack(values: Record<string, string | string[] | boolean | undefined>, env: CliIo["env"]): OperatorStack {
  const flag = (name: string) => {
    const value = values[name];
    return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
  };
  const fromEnv = (name: string) => env[name]?.trim() || undefined;
  const stage = flag("stage") ?? fromEnv("SLS_STAGE") ?? fromEnv("SLS_LOCAL_STAGE") ?? "dev";
  const names = stageResourceNames(stage);
  const config = readConfig(flag("config"), env);
  const site = flag("site") ?? fromEnv("PROVISIONER_SITE") ?? config.site;
  if (site === undefined) throw new UsageError("the site is unknown: pass --site, or --config with the provisioner YAML");
  const region = flag("region") ?? fromEnv("AWS_REGION") ?? fromEnv("AWS_DEFAULT_REGION") ?? "us-east-1";
  return {
    ...(config.timing ? { timing: config.timing } : {}),
    ...(config.renew ? { renew: config.renew } : {}),
    stage,
    site,
    deploymentId: flag("deployment") ?? fromEnv("PROVISIONER_DEPLOYMENT_ID") ?? config.deploymentId ?? fromEnv("AWS_REGION") ?? "local",
    region,
    leaseTable: flag("lease-table") ?? fromEnv("LEASE_TABLE") ?? names.leaseTable,
    admissionTable: flag("admission-table") ?? fromEnv("ADMISSION_TABLE") ?? names.admissionTable,
    queues: {
      hostWork: flag("host-work-queue") ?? fromEnv("HOST_WORK_QUEUE_URL") ?? names.hostWorkQueue,
      hostWorkDlq: flag("host-work-dlq") ?? fromEnv("HOST_WORK_DLQ_URL") ?? names.hostWorkDlq,
      lifecycle: flag("lifecycle-queue") ?? fromEnv("LIFECYCLE_QUEUE_URL") ?? names.lifecycleQueue,
      lifecycleDlq: flag("lifecycle-dlq") ?? fromEnv("LIFECYCLE_DLQ_URL") ?? names.lifecycleDlq,
    },
    dynamoDbEndpoint: flag("dynamodb-endpoint") ?? fromEnv("DYNAMODB_ENDPOINT"),
    sqsEndpoint: flag("sqs-endpoint") ?? fromEnv("SQS_ENDPOINT"),
  };
}

/** The renew settings of the configuration, when they parse: `status` then says whether renewal keeps up. */
function renewOf(record: Record<string, unknown>): Pick<OperatorStack, "renew"> {
  const renew = renewSettingsOf(record);
  return renew ? { renew } : {};
}

function readConfig(
  file: string | undefined,
  env: CliIo["env"],
): Pick<OperatorStack, "timing" | "renew"> & { site?: string; deploymentId?: string } {
  const path = file ?? env.PROVISIONER_CONFIG?.trim();
  let text = env.PROVISIONER_CONFIG_YAML;
  if (path) {
    try {
      text = readFileSync(path, "utf8");
    } catch (error) {
      throw new UsageError(`cannot read the provisioner config ${path}: ${messageOf(error)}`);
    }
  }
  if (!text) return {};
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new UsageError(`the provisioner config is not valid YAML: ${messageOf(error)}`);
  }
  const record = (raw ?? {}) as Record<string, unknown>;
  const text_ = (value: unknown) => (typeof value === "string" && value.trim() !== "" ? value.trim() : undefined);
  const lease = (record.lease ?? {}) as Record<string, unknown>;
  let timing: { skewBoundMs: number; deliveryHorizonMs: number };
  try {
    timing = {
      skewBoundMs: text_(lease.skew_bound) ? parseDuration(text_(lease.skew_bound) as string) : OPERATOR_TIMING_DEFAULTS.skewBoundMs,
      deliveryHorizonMs: typeof record.rpc_ttl === "number" ? record.rpc_ttl * 1_000 : OPERATOR_TIMING_DEFAULTS.deliveryHorizonMs,
    };
  } catch (error) {
    throw new UsageError(`the provisioner config's lease.skew_bound is not a duration: ${messageOf(error)}`);
  }
  return {
    ...(typeof record.site === "string" ? { site: record.site } : {}),
    ...(text_(record.deployment_id) ? { deploymentId: text_(record.deployment_id) } : {}),
    timing,
    ...renewOf(record),
  };
}

// --- output for people ---------------------------------------------------------------------------

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length))) ?? [];
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ").trimEnd()).join("\n");
}

function ago(now: number, at: number | undefined): string {
  if (at === undefined || at === 0) return "-";
  const seconds = Math.round((now - at) / 1000);
  return seconds < 120 ? `${seconds}s ago` : seconds < 7_200 ? `${Math.round(seconds / 60)}m ago` : `${Math.round(seconds / 3_600)}h ago`;
}

function leaseLine(lease: OperatorStatus["lease"]): string {
  if (lease.leader === null) return lease.term === null ? "nobody has held the lease yet" : `released (last term ${lease.term})`;
  const expiry =
    (lease.expiresInMs ?? 0) > 0 ? `expires in ${((lease.expiresInMs ?? 0) / 1000).toFixed(1)}s` : `expired ${(-(lease.expiresInMs ?? 0) / 1000).toFixed(1)}s ago`;
  return `${lease.leader} holds term ${lease.term}, ${expiry}`;
}

function formatStatus(status: OperatorStatus, now: number): string {
  const role = status.paused ? "PAUSED" : status.lease.heldByThisDeployment ? "LEADER" : "STANDBY";
  const lines = [
    `site "${status.site}", deployment ${status.deploymentId}: ${role}`,
    `lease: ${leaseLine(status.lease)}`,
  ];
  if (status.pause?.paused) {
    lines.push(`paused ${ago(now, status.pause.changedAt)}${status.pause.by ? ` by ${status.pause.by}` : ""}${status.pause.reason ? `: ${status.pause.reason}` : ""}`);
  }
  const queueNames = { hostWork: "host work", hostWorkDlq: "host-work DLQ", lifecycle: "lifecycle", lifecycleDlq: "lifecycle DLQ" } as const;
  lines.push(
    "",
    table([
      ["queue", "visible", "in flight", "delayed"],
      ...Object.entries(queueNames).map(([key, label]) => {
        const counts = status.queues[key as keyof typeof queueNames];
        return "error" in counts ? [label, `error: ${counts.error}`, "", ""] : [label, String(counts.visible), String(counts.inFlight), String(counts.delayed)];
      }),
    ]),
  );
  const { byState } = status.registry;
  lines.push(
    "",
    `registry: ${status.registry.total} hosts (${[
      ...Object.entries(byState).map(([state, count]) => `${state} ${count}`),
      // Past their expiry: no work is waiting for them, the table's TTL has not deleted them yet.
      ...(status.registry.expired > 0 ? [`expired ${status.registry.expired}`] : []),
    ].join(", ")})`,
  );
  if (status.renewal) lines.push("", formatRenewalReport(status.renewal, now));
  if (status.registry.lastErrors.length > 0) {
    lines.push(
      "",
      "last errors",
      table([
        ["host", "state", "step", "failures", "when", "error"],
        ...status.registry.lastErrors.map((entry) => [
          entry.identity,
          entry.state,
          entry.failedStep ?? "-",
          entry.failures === undefined ? "-" : String(entry.failures),
          ago(now, entry.lastErrorAt),
          entry.lastError,
        ]),
      ]),
    );
  }
  return lines.join("\n");
}

function formatElection(view: ElectionView): string {
  return [
    `site "${view.site}": ${leaseLine(view.lease)}`,
    "",
    table([
      ["deployment", "role", "paused"],
      ...view.deployments.map((deployment) => [
        deployment.deploymentId,
        deployment.role,
        deployment.paused ? `yes${deployment.pause?.by ? ` (by ${deployment.pause.by})` : ""}` : "no",
      ]),
    ]),
  ].join("\n");
}

function formatDeadLetters(letters: readonly DeadLetterView[], now: number, inFlight = 0): string {
  const busy = inFlight > 0 ? `${inFlight} more in flight (another listing or requeue holds them, for up to a minute): list again to see them` : "";
  if (letters.length === 0) return busy ? `no dead letter could be read; ${busy}` : "the host-work DLQ is empty";
  return [
    `${letters.length} dead letters${busy ? `; ${busy}` : ""}`,
    table([
      // "receives" counts every receive, a listing's own included (SQS has no peek): not the host's failures.
      ["host", "term", "step", "failures", "receives", "sent", "reason"],
      ...letters.map((letter) => [
        letter.identity ?? (letter.poison ? "(poison)" : "-"),
        letter.term === undefined ? "-" : String(letter.term),
        letter.step ?? "-",
        letter.failures === undefined ? "-" : String(letter.failures),
        String(letter.receiveCount),
        ago(now, letter.sentAt),
        letter.reason,
      ]),
    ]),
  ].join("\n");
}

const plural = (count: number, one: string) => `${count} ${one}${count === 1 ? "" : "s"}`;

/** The Choria CLI's way: what was done per host, then "Finished processing N ...". */
function formatReadmit(command: "requeue" | "reprovision", result: ReadmitResult): string {
  const done = command === "requeue" ? "requeued" : "admitted for provisioning";
  const lines = [
    ...result.requeued.map((identity) => `${identity}: ${done} under term ${result.term}`),
    ...result.skipped.map((skip) => `${skip.identity ?? `(message ${skip.messageId})`}: not ${command === "requeue" ? "requeued" : "admitted"}: ${skip.reason}`),
  ];
  const total = result.requeued.length + result.skipped.length;
  lines.push(
    "",
    `Finished processing ${plural(total, command === "requeue" ? "dead-lettered host" : "host")}: ` +
      `${result.requeued.length} ${done}, ${result.skipped.length} not`,
  );
  if (command === "reprovision" && result.requeued.length > 0) {
    lines.push("Admitted hosts are provisioned once they answer in provisioning mode; this does not put a configured node back into it.");
  }
  return lines.join("\n");
}

const utc = (epochMs: number) => `${new Date(epochMs).toISOString().slice(11, 19)} UTC`;

function formatPause(state: PauseResult, now: number): string {
  const head = `paused deployment ${state.deploymentId} of site "${state.site}": it stops working at its next lease round and no longer contests the lease`;
  if (state.takeoverAt === null) return `${head}; it does not hold the lease, so nothing fails over.`;
  return (
    `${head}.\nIt holds the lease: a standby can take over from ${utc(state.takeoverAt)} (in ${Math.max(0, Math.round((state.takeoverAt - now) / 1000))} s): ` +
    "the lease's expiry plus skew_bound plus rpc_ttl, the longest an old request may still reach a node."
  );
}
