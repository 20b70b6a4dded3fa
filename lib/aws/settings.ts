import type { FunctionName } from "../config/secrets";
import { AppSettingsError, type SettingProblem } from "../errors";

/** Where the functions find their tables, queues and broker stream; see docs/lifecycle.md and the app contract. */
export interface AppSettings {
  /** The deployed function this container runs (its handler says which); unset in local runs of them all. */
  function?: FunctionName;
  /** Environment `loadConfig` reads the provisioner configuration from (PROVISIONER_CONFIG[_YAML], overrides). */
  configEnv: Record<string, string | undefined>;
  /**
   * Required when `leader_election` is on: a table name, or a table ARN (any Region or account; the
   * lease client then uses the ARN's Region, DynamoDB takes the ARN as the table name).
   */
  leaseTable?: string;
  /** The site's admission table, shared by its deployments: a name or a table ARN, as the lease table. */
  admissionTable: string;
  hostWorkQueueUrl: string;
  hostWorkDlqUrl: string;
  lifecycleQueueUrl: string;
  lifecycleDlqUrl: string;
  /** Local emulator endpoints; when set, static local credentials are used. */
  dynamoDbEndpoint?: string;
  sqsEndpoint?: string;
  region?: string;
  /** JetStream stream expected to hold `choria.lifecycle.event.>`. */
  lifecycleStream: string;
  /** Durable consumer name; default `provisioner-<site>` once the site is known. */
  lifecycleConsumer?: string;
  serviceName: string;
  metricsNamespace: string;
  /** First visibility delay for work that goes back to the queue; grows with each receive. */
  retryBaseDelaySeconds: number;
  retryMaxDelaySeconds: number;
  /** Hard failures in a row at one step before a host is parked in the host-work DLQ. */
  hostFailureLimit: number;
  /** Ms kept back from the Lambda deadline for acknowledging and flushing. */
  deadlineMarginMs: number;
  /** How often the leaseKeeper schedule fires (1 minute on AWS): each run arms the ticks up to the next. */
  keeperRateSeconds: number;
}

export const APP_DEFAULTS = {
  lifecycleStream: "CHORIA_LIFECYCLE",
  serviceName: "choria-provisioner",
  metricsNamespace: "ChoriaProvisioner",
  retryBaseDelaySeconds: 30,
  retryMaxDelaySeconds: 300,
  hostFailureLimit: 3,
  deadlineMarginMs: 1_000,
  keeperRateSeconds: 60,
} as const;

/** How a variable's text is read: each returns the value, or says what is wrong with the text. */
const READERS = {
  text: (text: string) => text,
  url: (text: string) => (URL.canParse(text) ? text : problem(`"${text}" is not a URL`)),
  table: (text: string) =>
    !text.startsWith("arn:") || tableArnRegion(text)
      ? text
      : problem(`"${text}" is not a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)`),
  seconds: (text: string) => (/^\d+$/.test(text) ? Number(text) : problem("must be a whole number of seconds")),
  count: (text: string) => (/^[1-9]\d*$/.test(text) ? Number(text) : problem("must be a whole number of at least 1")),
} as const;

interface VariableSpec {
  /** The environment variables read, first set wins. */
  readonly env: string | readonly string[];
  readonly read: keyof typeof READERS;
  readonly required?: true;
  readonly fallback?: string | number;
}

type FromEnvironment = Exclude<keyof AppSettings, "function" | "configEnv" | "deadlineMarginMs">;

/**
 * THE table of the functions' environment: for each setting, the variable serverless.yml sets, how
 * its text is read, and whether it is required or has a default. `appSettingsFromEnv` is derived
 * from it and reports every bad variable at once.
 */
const VARIABLES: Readonly<Record<FromEnvironment, VariableSpec>> = {
  leaseTable: { env: "LEASE_TABLE", read: "table" },
  admissionTable: { env: "ADMISSION_TABLE", read: "table", required: true },
  hostWorkQueueUrl: { env: "HOST_WORK_QUEUE_URL", read: "url", required: true },
  hostWorkDlqUrl: { env: "HOST_WORK_DLQ_URL", read: "url", required: true },
  lifecycleQueueUrl: { env: "LIFECYCLE_QUEUE_URL", read: "url", required: true },
  lifecycleDlqUrl: { env: "LIFECYCLE_DLQ_URL", read: "url", required: true },
  dynamoDbEndpoint: { env: "DYNAMODB_ENDPOINT", read: "url" },
  sqsEndpoint: { env: "SQS_ENDPOINT", read: "url" },
  region: { env: ["AWS_REGION", "AWS_DEFAULT_REGION"], read: "text" },
  lifecycleStream: { env: "LIFECYCLE_STREAM", read: "text", fallback: APP_DEFAULTS.lifecycleStream },
  lifecycleConsumer: { env: "LIFECYCLE_CONSUMER", read: "text" },
  serviceName: { env: "POWERTOOLS_SERVICE_NAME", read: "text", fallback: APP_DEFAULTS.serviceName },
  metricsNamespace: { env: "POWERTOOLS_METRICS_NAMESPACE", read: "text", fallback: APP_DEFAULTS.metricsNamespace },
  retryBaseDelaySeconds: { env: "RETRY_BASE_DELAY_SECONDS", read: "seconds", fallback: APP_DEFAULTS.retryBaseDelaySeconds },
  retryMaxDelaySeconds: { env: "RETRY_MAX_DELAY_SECONDS", read: "seconds", fallback: APP_DEFAULTS.retryMaxDelaySeconds },
  hostFailureLimit: { env: "HOST_FAILURE_LIMIT", read: "count", fallback: APP_DEFAULTS.hostFailureLimit },
  keeperRateSeconds: { env: "KEEPER_RATE_SECONDS", read: "count", fallback: APP_DEFAULTS.keeperRateSeconds },
};

class Problem {
  constructor(readonly message: string) {}
}

function problem(message: string): Problem {
  return new Problem(message);
}

const TABLE_ARN = /^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):\d{12}:table\/[A-Za-z0-9_.-]{3,255}$/;

/** The Region of a DynamoDB table ARN; undefined for a plain table name. */
export function tableArnRegion(table: string): string | undefined {
  return TABLE_ARN.exec(table)?.[1];
}

/** Reads and validates the functions' environment; throws AppSettingsError naming every bad variable. */
export function appSettingsFromEnv(env: NodeJS.ProcessEnv): AppSettings {
  const problems: SettingProblem[] = [];
  const optional = (name: string): string | undefined => env[name]?.trim() || undefined;
  if (!optional("PROVISIONER_CONFIG") && !optional("PROVISIONER_CONFIG_YAML")) {
    problems.push({ variable: "PROVISIONER_CONFIG_YAML", message: "set PROVISIONER_CONFIG_YAML (inline YAML) or PROVISIONER_CONFIG (a file path)" });
  }
  const values: Record<string, unknown> = {};
  for (const [field, spec] of Object.entries(VARIABLES)) {
    const names = typeof spec.env === "string" ? [spec.env] : spec.env;
    const name = names.find((candidate) => optional(candidate) !== undefined);
    const text = name === undefined ? undefined : optional(name);
    if (name === undefined || text === undefined) {
      if (spec.required) problems.push({ variable: names[0] ?? field, message: "is required" });
      values[field] = spec.fallback;
      continue;
    }
    const value = READERS[spec.read](text);
    if (value instanceof Problem) problems.push({ variable: name, message: value.message });
    else values[field] = value;
  }
  if (problems.length > 0) throw new AppSettingsError(problems);
  return { ...(values as Omit<AppSettings, "configEnv" | "deadlineMarginMs">), configEnv: { ...env }, deadlineMarginMs: APP_DEFAULTS.deadlineMarginMs };
}
