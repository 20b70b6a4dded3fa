/**
 * `choria-provisioner`: the operator CLI, an adapter over lib/app/operator/. It finds the
 * deployment's tables and queues by the names serverless.yml gives them (from `--stage`), or from
 * flags, or from the environment the functions get (LEASE_TABLE, HOST_WORK_QUEUE_URL, ... as
 * scripts/local-services.ts and `npm run local -- --keep-running` print them), checks they exist,
 * and prints boxed tables for people or JSON (`--json`) for scripts. Every error is one line on
 * stderr in the CLI's own words: exit code 2 for a usage mistake, 1 for a refusal or a failure.
 * See docs/operations.md.
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { describeAwsError, openOperator, type OperatorStack, type StackNeeds } from "../lib/aws/operator-stack";
import { renewSettingsOf } from "../lib/config/renew-capacity";
import { messageOf, StackNotFoundError } from "../lib/errors";
import { stageResourceNames } from "../lib/aws/stage-resources";
import { systemClock, type Clock } from "../lib/ports/clock";
import { parseDuration } from "../lib/config/duration";
import { OperatorRefusal } from "../lib/app/operator/report";
import { OPERATOR_TIMING_DEFAULTS } from "../lib/app/operator/site-operator";
import { readCommandLine, type CommandSpec, type Values } from "./command-line";
import { formatDeadLetters, formatElection, formatPause, formatQuarantine, formatReprovision, formatRequeue, formatStatus, requeueJson } from "./format";
import { HISTORY_USAGE, ISSUED_USAGE, runHistory, runIssued } from "./ledger";
import { REGISTRY_HELP, runRegistryMerge } from "./registry-merge";
import { RENEW_USAGE, runRenew } from "./renew";
import { UsageError } from "./usage-error";

export interface CliIo {
  stdout(text: string): void;
  stderr(text: string): void;
  env: Record<string, string | undefined>;
  clock?: Clock;
}

/** What a command runs with: the opened stack, its options and arguments, and how to print. */
interface CommandRun {
  opened: Awaited<ReturnType<typeof openOperator>>;
  values: Values;
  args: readonly string[];
  env: CliIo["env"];
  now: number;
  print: (value: unknown, human: () => string) => void;
}

/** A command: its usage and options, the tables and queues it opens, and what it does with them (returns the exit code). */
interface Command extends CommandSpec {
  needs: StackNeeds;
  run(run: CommandRun): Promise<number>;
}

const PAUSE_OPTIONS = ["reason", "by", "force"] as const;

/** Every command, in the order the usage lists them. */
const COMMANDS: Record<string, Command> = {
  status: {
    usage: `  status                      role, lease holder, term and expiry, pause switch, queue depths, registry counts,
                              credentials and renewal, last errors
`,
    options: [],
    needs: { tables: ["lease", "admission"], queues: ["hostWork", "hostWorkDlq", "lifecycle", "lifecycleDlq"] },
    async run({ opened, now, print }) {
      const status = await opened.operator.status();
      print(status, () => formatStatus(status, now));
      return 0;
    },
  },
  "election view": {
    usage: `  election view | info        the site's lease and every deployment known to it (leader, standby or candidate;
                              paused or not)
`,
    options: [],
    needs: { tables: ["lease"], queues: [] },
    async run({ opened, print }) {
      const view = await opened.operator.electionView();
      print(view, () => formatElection(view));
      return 0;
    },
  },
  "dlq list": {
    usage: `  dlq list                    host-work dead letters: host, term, step, failures, reason
`,
    options: [],
    needs: { tables: ["lease", "admission"], queues: ["hostWorkDlq"] },
    async run({ opened, now, print }) {
      const listing = await opened.operator.listDeadLetters();
      // JSON stays the list of letters scripts read; people also hear of letters in flight.
      print(listing.letters, () => formatDeadLetters(listing.letters, now, listing.inFlight));
      return 0;
    },
  },
  "dlq requeue": {
    usage: `  dlq requeue (--all | <identity>...)
                              admit dead-lettered hosts again under the current term, removing each one's
                              dead letters as soon as its work is queued
`,
    options: ["all"],
    takesArguments: true,
    needs: { tables: ["lease", "admission"], queues: ["hostWork", "hostWorkDlq"] },
    async run({ opened, values, args, print }) {
      if ((values.all === true) === (args.length > 0)) throw new UsageError("dlq requeue takes either --all or one or more identities");
      const result = await opened.operator.requeueDeadLetters(values.all ? {} : { identities: args });
      print(requeueJson(result), () => formatRequeue(result));
      return result.admitted.length > 0 || result.refused.length === 0 ? 0 : 1;
    },
  },
  pause: {
    usage: `  pause [--reason TEXT] [--by NAME] [--force]
                              this deployment stops working and stops contesting the lease (--force: also a
                              deployment the site does not know yet; --by: who, default $USER)
`,
    options: PAUSE_OPTIONS,
    needs: { tables: ["lease"], queues: [] },
    run: (run) => setPaused(run, true),
  },
  resume: {
    usage: `  resume [--reason TEXT] [--by NAME] [--force]
                              undo pause
`,
    options: PAUSE_OPTIONS,
    needs: { tables: ["lease"], queues: [] },
    run: (run) => setPaused(run, false),
  },
  reprovision: {
    usage: `  reprovision <identity>... [--force]
                              admit hosts for provisioning now under the current term (overrides the
                              once-per-interval rule). It does not send a configured node back to
                              provisioning mode; hosts the registry does not know or has just provisioned
                              are refused unless --force (the reprovision function: "force": true)
`,
    options: ["force"],
    takesArguments: true,
    needs: { tables: ["lease", "admission"], queues: ["hostWork"] },
    async run({ opened, values, args, print }) {
      if (args.length === 0) throw new UsageError("reprovision needs one or more identities");
      const result = await opened.operator.reprovision(args, { force: values.force === true });
      print(result, () => formatReprovision(result));
      return result.refused.length === 0 ? 0 : 1;
    },
  },
  "quarantine list": {
    usage: `  quarantine list             quarantined hosts: identity, when, why, and each sender's evidence (fingerprints,
                              provisioning JWT subject and expiry)
`,
    options: [],
    needs: { tables: ["lease", "admission"], queues: [] },
    async run({ opened, now, print }) {
      const hosts = await opened.operator.listQuarantine();
      print(hosts, () => formatQuarantine(hosts, now));
      return 0;
    },
  },
  "quarantine release": {
    usage: `  quarantine release <identity>
                              release a quarantined host once resolved: admissible at once, the next discovery
                              or startup event provisions it (or quarantines it again if two machines still
                              answer as it)
`,
    options: [],
    takesArguments: true,
    needs: { tables: ["lease", "admission"], queues: [] },
    async run({ opened, args, print }) {
      if (args.length !== 1) throw new UsageError("quarantine release takes one identity");
      const result = await opened.operator.releaseQuarantine(args[0] as string);
      print(result, () => (result.released ? `released ${result.identity}: the next discovery or startup event admits it` : `${result.identity} is not quarantined`));
      return result.released ? 0 : 1;
    },
  },
  renew: {
    usage: RENEW_USAGE,
    options: ["identity", "due-within", "all", "rate", "dry-run", "resume", "by"],
    takesArguments: true,
    needs: { tables: ["lease", "admission"], queues: [] },
    run: ({ opened, values, args, env, print }) => runRenew(opened.renewal, values, args, print, env.USER ?? env.LOGNAME),
  },
  "registry merge": {
    usage: REGISTRY_HELP,
    options: ["from", "apply"],
    // The merge finds its tables itself: the target may be an ARN in another Region.
    needs: { tables: [], queues: [] },
    run: ({ opened, values, print }) => runRegistryMerge(opened.registryMerge, values, print),
  },
  history: {
    usage: HISTORY_USAGE,
    options: [],
    takesArguments: true,
    needs: { tables: ["admission"], queues: [] },
    run: ({ opened, args, print }) => runHistory(opened.issuance, args, print),
  },
  issued: {
    usage: ISSUED_USAGE,
    options: ["since", "ca"],
    needs: { tables: ["admission"], queues: [] },
    run: ({ opened, values, print }) => runIssued(opened.issuance, values, print),
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

/** One line, whatever the error's text: an SDK or YAML message may span several. */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ").trim();

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let line;
  try {
    line = readCommandLine(argv, COMMANDS);
  } catch (error) {
    io.stderr(`choria-provisioner: ${oneLine(messageOf(error))}\n`);
    return 2;
  }
  if (line.kind === "help") {
    (line.code === 0 ? io.stdout : io.stderr)(line.text);
    return line.code;
  }
  const { name, values, args } = line;
  const command = COMMANDS[name] as Command;
  let opened: Awaited<ReturnType<typeof openOperator>> | undefined;
  try {
    const clock = io.clock ?? systemClock;
    opened = await openOperator(resolveStack(values, io.env), command.needs, clock);
    const json = values.json === true;
    const print = (value: unknown, human: () => string) => io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
    return await command.run({ opened, values, args, env: io.env, now: clock.now(), print });
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`choria-provisioner: ${oneLine(error.message)}; see choria-provisioner ${name} --help\n`);
      return 2;
    }
    const refusal = error instanceof OperatorRefusal || error instanceof StackNotFoundError;
    io.stderr(`choria-provisioner: ${oneLine(refusal ? error.message : describeAwsError(error))}\n`);
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
    ...(config.provisioningJwtWarningMs === undefined ? {} : { provisioningJwtWarningMs: config.provisioningJwtWarningMs }),
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
): Pick<OperatorStack, "timing" | "renew" | "provisioningJwtWarningMs"> & { site?: string; deploymentId?: string } {
  const path = file ?? env.PROVISIONER_CONFIG?.trim();
  let text = env.PROVISIONER_CONFIG_YAML;
  if (path) {
    try {
      text = readFileSync(path, "utf8");
    } catch (error) {
      throw new UsageError(`cannot read the provisioner config ${path}: ${messageOf(error)}`, { cause: error });
    }
  }
  if (!text) return {};
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    // The parser's first line says what and where; the rest is a picture of the line.
    throw new UsageError(`the provisioner config is not valid YAML: ${messageOf(error).split("\n")[0]}`, { cause: error });
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
    throw new UsageError(`the provisioner config's lease.skew_bound is not a duration: ${messageOf(error)}`, { cause: error });
  }
  return {
    ...(typeof record.site === "string" ? { site: record.site } : {}),
    ...(text_(record.deployment_id) ? { deploymentId: text_(record.deployment_id) } : {}),
    timing,
    ...renewOf(record),
    ...provisioningJwtWarningOf(text_(record.provisioning_jwt_warning)),
  };
}

/** The configuration's `provisioning_jwt_warning`, when set: status forecasts the provisioning JWTs over it (default 30 days). */
function provisioningJwtWarningOf(text: string | undefined): Pick<OperatorStack, "provisioningJwtWarningMs"> {
  if (text === undefined) return {};
  try {
    return { provisioningJwtWarningMs: parseDuration(text) };
  } catch (error) {
    throw new UsageError(`the provisioner config's provisioning_jwt_warning is not a duration: ${messageOf(error)}`, { cause: error });
  }
}

