/**
 * The CLI's command line: which command, its arguments and options, or which help to print. Every
 * mistake is a UsageError in the CLI's own words that names the command and where its help is
 * (Node's parseArgs messages are for programmers); an option a command does not take is as unknown
 * to it as a misspelt one, so nothing given is silently ignored.
 */
import { parseArgs } from "node:util";
import { LEDGER_OPTIONS } from "./ledger";
import { MERGE_OPTIONS } from "./registry-merge";
import { RENEW_OPTIONS } from "./renew";
import { UsageError } from "./usage-error";

/** Every option of every command; each command takes the ones of WHERE_AND_OUTPUT and its own. */
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
  help: { type: "boolean" },
  all: { type: "boolean" },
  reason: { type: "string" },
  by: { type: "string" },
  force: { type: "boolean" },
  ...RENEW_OPTIONS,
  ...MERGE_OPTIONS,
  ...LEDGER_OPTIONS,
} as const;

type OptionName = keyof typeof OPTIONS;

/** Where the deployment is, and how to print: every command takes these. */
const WHERE_AND_OUTPUT: readonly OptionName[] = [
  "stage",
  "site",
  "deployment",
  "config",
  "lease-table",
  "admission-table",
  "host-work-queue",
  "host-work-dlq",
  "lifecycle-queue",
  "lifecycle-dlq",
  "region",
  "dynamodb-endpoint",
  "sqs-endpoint",
  "json",
  "help",
];

const WHERE_AND_OUTPUT_HELP = `Where the deployment is (flags win over the environment):
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
  --help                      this text, or after a command its own usage
`;

/** What the command line needs to know of a command. */
export interface CommandSpec {
  /** Its lines in the usage text. */
  usage: string;
  /** The options it takes besides where the deployment is and the output. */
  options: readonly OptionName[];
  /** Whether it takes arguments after its name (identities). */
  takesArguments?: boolean;
}

/** Other names of a command, as the Choria CLI has them. */
const ALIASES: Record<string, string> = { "election info": "election view" };

export type Values = ReturnType<typeof strictParse>["values"];

export type CommandLine =
  | { kind: "help"; text: string; code: 0 | 2 }
  | { kind: "run"; name: string; values: Values; args: string[] };

const strictParse = (argv: readonly string[]) => parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: true });

/** The usage of everything, or of one group of commands (`election`, `dlq`, `registry`). */
function usageText(commands: Record<string, CommandSpec>, group?: string): string {
  const names = Object.keys(commands).filter((name) => group === undefined || name.startsWith(`${group} `));
  const usages = names.map((name) => commands[name]?.usage ?? "").join("");
  if (group === undefined) return `Usage: choria-provisioner <command> [options]\n\nCommands:\n${usages}\n${WHERE_AND_OUTPUT_HELP}`;
  const subcommands = names.map((name) => name.slice(group.length + 1)).join("|");
  return `Usage: choria-provisioner ${group} <${subcommands}> [options]\n\n${usages}\nchoria-provisioner --help lists the options.\n`;
}

/** Reads the command line; a mistake is a UsageError whose message ends with where the help is. */
export function readCommandLine(argv: readonly string[], commands: Record<string, CommandSpec>): CommandLine {
  const { positionals, tokens } = parseArgs({ args: [...argv], options: OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const help = tokens.some((token) => token.kind === "option" && token.name === "help");
  const first = positionals[0];
  if (first === undefined) {
    checkOptions(tokens, undefined, WHERE_AND_OUTPUT);
    return { kind: "help", text: usageText(commands), code: help ? 0 : 2 };
  }
  const isGroup = Object.keys(commands).some((name) => name.startsWith(`${first} `));
  if (isGroup && positionals[1] === undefined) return { kind: "help", text: usageText(commands, first), code: 0 };
  const asked = isGroup ? `${first} ${positionals[1]}` : first;
  const name = ALIASES[asked] ?? asked;
  const command = commands[name];
  if (!command) {
    throw isGroup
      ? new UsageError(`unknown ${first} command "${positionals[1]}"; see choria-provisioner ${first} --help`)
      : new UsageError(`unknown command "${first}"; see choria-provisioner --help`);
  }
  if (help) return { kind: "help", text: `Usage:\n${command.usage}\n${WHERE_AND_OUTPUT_HELP}`, code: 0 };
  checkOptions(tokens, name, [...WHERE_AND_OUTPUT, ...command.options]);
  const args = positionals.slice(name.split(" ").length);
  if (!command.takesArguments && args.length > 0) {
    throw new UsageError(`${name} takes no arguments, not "${args.join(" ")}"; see choria-provisioner ${name} --help`);
  }
  let values: Values;
  try {
    values = strictParse(argv).values;
  } catch (error) {
    // What checkOptions did not foresee, in one line still.
    const line = (error instanceof Error ? error.message : String(error)).split("\n")[0];
    throw new UsageError(`${line}; see choria-provisioner ${name} --help`, { cause: error });
  }
  return { kind: "run", name, values, args };
}

type Token = ReturnType<typeof parseArgs>["tokens"] extends Array<infer T> | undefined ? T : never;

/** Each option given is one the command takes, with a value exactly when it needs one. */
function checkOptions(tokens: readonly Token[], command: string | undefined, allowed: readonly OptionName[]): void {
  const where = command === undefined ? "" : ` for ${command}`;
  const help = `see choria-provisioner${command === undefined ? "" : ` ${command}`} --help`;
  for (const token of tokens) {
    if (token.kind !== "option") continue;
    const option = Object.hasOwn(OPTIONS, token.name) && allowed.includes(token.name as OptionName) ? OPTIONS[token.name as OptionName] : undefined;
    if (!option) throw new UsageError(`unknown option ${token.rawName}${where}; ${help}`);
    if (option.type === "boolean" && token.inlineValue) throw new UsageError(`option ${token.rawName} takes no value; ${help}`);
    if (option.type === "string" && (token.value === undefined || (!token.inlineValue && token.value.startsWith("-")))) {
      // A value that starts with a dash is another option, unless written --name=value.
      throw new UsageError(`option ${token.rawName} needs a value; ${help}`);
    }
  }
}
