import type { FunctionName } from "../config/secrets";
import { AppSettingsError } from "../errors";

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
}

export const APP_DEFAULTS = {
  lifecycleStream: "CHORIA_LIFECYCLE",
  serviceName: "choria-provisioner",
  metricsNamespace: "ChoriaProvisioner",
  retryBaseDelaySeconds: 30,
  retryMaxDelaySeconds: 300,
  hostFailureLimit: 3,
  deadlineMarginMs: 1_000,
} as const;

function positiveCount(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  if (!/^[1-9]\d*$/.test(text)) throw new AppSettingsError(name, "must be a whole number of at least 1");
  return Number(text);
}

const TABLE_ARN = /^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):\d{12}:table\/[A-Za-z0-9_.-]{3,255}$/;

/** The Region of a DynamoDB table ARN; undefined for a plain table name. */
export function tableArnRegion(table: string): string | undefined {
  return TABLE_ARN.exec(table)?.[1];
}

/** Reads and validates the functions' environment; throws AppSettingsError naming the bad variable. */
export function appSettingsFromEnv(env: NodeJS.ProcessEnv): AppSettings {
  const required = (name: string): string => {
    const value = env[name]?.trim();
    if (!value) throw new AppSettingsError(name, "is required");
    return value;
  };
  const optional = (name: string): string | undefined => env[name]?.trim() || undefined;
  const url = (name: string, value: string | undefined): string | undefined => {
    if (value === undefined) return undefined;
    try {
      new URL(value);
    } catch {
      throw new AppSettingsError(name, `"${value}" is not a URL`);
    }
    return value;
  };
  if (!optional("PROVISIONER_CONFIG") && !optional("PROVISIONER_CONFIG_YAML")) {
    throw new AppSettingsError("PROVISIONER_CONFIG_YAML", "set PROVISIONER_CONFIG_YAML (inline YAML) or PROVISIONER_CONFIG (a file path)");
  }
  const seconds = (name: string, fallback: number): number => {
    const text = optional(name);
    if (text === undefined) return fallback;
    if (!/^\d+$/.test(text)) throw new AppSettingsError(name, "must be a whole number of seconds");
    return Number(text);
  };
  return {
    configEnv: { ...env },
    leaseTable: table("LEASE_TABLE", optional("LEASE_TABLE")),
    admissionTable: table("ADMISSION_TABLE", required("ADMISSION_TABLE")) as string,
    hostWorkQueueUrl: url("HOST_WORK_QUEUE_URL", required("HOST_WORK_QUEUE_URL")) as string,
    hostWorkDlqUrl: url("HOST_WORK_DLQ_URL", required("HOST_WORK_DLQ_URL")) as string,
    lifecycleQueueUrl: url("LIFECYCLE_QUEUE_URL", required("LIFECYCLE_QUEUE_URL")) as string,
    lifecycleDlqUrl: url("LIFECYCLE_DLQ_URL", required("LIFECYCLE_DLQ_URL")) as string,
    dynamoDbEndpoint: url("DYNAMODB_ENDPOINT", optional("DYNAMODB_ENDPOINT")),
    sqsEndpoint: url("SQS_ENDPOINT", optional("SQS_ENDPOINT")),
    region: optional("AWS_REGION") ?? optional("AWS_DEFAULT_REGION"),
    lifecycleStream: optional("LIFECYCLE_STREAM") ?? APP_DEFAULTS.lifecycleStream,
    lifecycleConsumer: optional("LIFECYCLE_CONSUMER"),
    serviceName: optional("POWERTOOLS_SERVICE_NAME") ?? APP_DEFAULTS.serviceName,
    metricsNamespace: optional("POWERTOOLS_METRICS_NAMESPACE") ?? APP_DEFAULTS.metricsNamespace,
    retryBaseDelaySeconds: seconds("RETRY_BASE_DELAY_SECONDS", APP_DEFAULTS.retryBaseDelaySeconds),
    retryMaxDelaySeconds: seconds("RETRY_MAX_DELAY_SECONDS", APP_DEFAULTS.retryMaxDelaySeconds),
    hostFailureLimit: positiveCount("HOST_FAILURE_LIMIT", optional("HOST_FAILURE_LIMIT"), APP_DEFAULTS.hostFailureLimit),
    deadlineMarginMs: APP_DEFAULTS.deadlineMarginMs,
  };
}

/** A table's name, or its ARN (a site table another deployment owns, maybe in another Region). */
function table(name: string, value: string | undefined): string | undefined {
  if (value?.startsWith("arn:") && !tableArnRegion(value)) {
    throw new AppSettingsError(name, `"${value}" is not a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)`);
  }
  return value;
}
