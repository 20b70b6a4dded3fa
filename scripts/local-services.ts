/**
 * Starts the services a deployment talks to, locally, for `sls invoke local` (docs/deploy.md):
 * nats-server (JetStream, with the CHORIA_LIFECYCLE stream), DynamoDB Local with the lease and
 * admission tables, fauxqs with the host-work and lifecycle queues and their DLQs, and optionally a
 * simulated fleet of provisioning-mode nodes. Prints the `export` lines scripts/sls-local.sh reads,
 * then stays up until Ctrl-C.
 *
 *   npm run local:services -- [--stage local] [--fleet 5] [--nats-port N] [--dynamodb-port N]
 *   (or node --import tsx scripts/local-services.ts ...)
 *
 * Ports are picked free and printed unless given. A usage mistake exits 2 before anything starts.
 */
import { parseArgs } from "node:util";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createLifecycleStream, createProvisionerTables, createQueueWithDeadLetter, LOCAL_STAGE, stageResourceNames } from "../dev/local/resources";
import { ensurePrerequisites, MissingPrerequisiteError } from "../dev/local/prerequisites";
import { LOCAL_AWS, ServiceStartError, startDynamoDbLocal, startNats, startSqs, type RunningService } from "../dev/local/services";
import { startFleet, type Fleet } from "../dev/simulator";
import { watchStopSignals } from "../dev/local/stop-signals";

/** The fleet's provisioning token (`cht`); config/local.yaml sends the same. */
const LOCAL_TOKEN = "local-provisioning-token";

const USAGE = `Usage: npm run local:services -- [options]

  --stage NAME          names the tables and queues as that stage's (default ${LOCAL_STAGE})
  --fleet N             also start N simulated provisioning-mode nodes (default 0)
  --nats-port N         nats-server's port (default a free one)
  --dynamodb-port N     DynamoDB Local's port (default a free one)
  --help

Prints the export lines scripts/sls-local.sh reads, then stays up until Ctrl-C.
`;

interface ServiceOptions {
  stage: string;
  fleetSize: number;
  natsPort: number | undefined;
  dynamoDbPort: number | undefined;
}

/** A usage mistake: one line naming it, exit 2 (as every command of the project), before anything starts. */
function fail(message: string): never {
  console.error(`local services: ${message} (see npm run local:services -- --help)`);
  process.exit(2);
}

/** The options, checked whole before a server starts; `--help` prints the usage and exits. */
function parseOptions(argv: string[]): ServiceOptions {
  let values: { stage?: string; fleet?: string; "nats-port"?: string; "dynamodb-port"?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { stage: { type: "string" }, fleet: { type: "string" }, "nats-port": { type: "string" }, "dynamodb-port": { type: "string" }, help: { type: "boolean" } },
      strict: true,
    }));
  } catch (error) {
    fail((error as Error).message);
  }
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const fleetSize = Number(values.fleet ?? "0");
  if (!Number.isInteger(fleetSize) || fleetSize < 0) fail(`--fleet must be a whole number, got "${values.fleet}"`);
  return { stage: values.stage ?? LOCAL_STAGE, fleetSize, natsPort: portOption("nats-port", values["nats-port"]), dynamoDbPort: portOption("dynamodb-port", values["dynamodb-port"]) };
}

/** A fixed port when given; otherwise a free one is picked and printed. */
function portOption(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) fail(`--${name} must be a port number (1-65535), got "${text}"`);
  return port;
}

async function main({ stage, fleetSize, natsPort, dynamoDbPort }: ServiceOptions): Promise<void> {
  const names = stageResourceNames(stage);
  await ensurePrerequisites({ say: (message) => console.log(`# ${message}`) });
  const running: Array<{ name: string; service: RunningService }> = [];
  let fleet: Fleet | undefined;

  let stopped = false;
  // Set once every server is up (below); main reaches its await only then.
  let stopRequested!: Promise<void>;
  // Every server is stopped even when another one's stop fails; the failures are reported after.
  const stopAll = async (): Promise<string[]> => {
    const failures: string[] = [];
    const attempt = async (what: string, stop: () => Promise<void>) => {
      try {
        await stop();
      } catch (error) {
        failures.push(`${what}: ${error instanceof Error ? error.message : String(error)}`);
      }
    };
    if (fleet) await attempt("the simulated fleet", () => (fleet as Fleet).stop());
    for (const { name, service } of running.reverse()) await attempt(name, () => service.stop());
    stopped = true;
    return failures;
  };
  // A forced exit (a second Ctrl-C) still takes the servers down.
  const pids: number[] = [];
  process.on("exit", () => {
    if (stopped) return;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  });

  try {
    const nats = await startNats({ port: natsPort });
    running.push({ name: "nats-server", service: nats });
    if (nats.pid !== undefined) pids.push(nats.pid);
    await createLifecycleStream(nats.url);

    const dynamo = await startDynamoDbLocal({ port: dynamoDbPort });
    running.push({ name: "DynamoDB Local", service: dynamo });
    if (dynamo.pid !== undefined) pids.push(dynamo.pid);
    const dynamoClient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamo.url });
    await createProvisionerTables(dynamoClient, { lease: names.leaseTable, admission: names.admissionTable });
    dynamoClient.destroy();

    const sqs = await startSqs();
    running.push({ name: "fauxqs", service: sqs });
    const attributes = { VisibilityTimeout: "60" };
    const hostWork = createQueueWithDeadLetter(sqs, names.hostWorkQueue, { maxReceiveCount: 10, attributes });
    const lifecycle = createQueueWithDeadLetter(sqs, names.lifecycleQueue, { maxReceiveCount: 5, attributes });

    if (fleetSize > 0) {
      fleet = await startFleet({ natsUrl: nats.url, count: fleetSize, token: LOCAL_TOKEN, identityPrefix: "node", domain: "local.example.net" });
    }

    // Heard before the first line that says the services are up, so a Ctrl-C right after it is
    // this orderly stop and never the default action that leaves the servers behind.
    stopRequested = untilStopped();
    const exports: Record<string, string> = {
      PROVISIONER_BROKER_URLS: nats.url,
      DYNAMODB_ENDPOINT: dynamo.url,
      SQS_ENDPOINT: sqs.url,
      HOST_WORK_QUEUE_URL: hostWork.url,
      HOST_WORK_DLQ_URL: hostWork.deadLetterUrl,
      LIFECYCLE_QUEUE_URL: lifecycle.url,
      LIFECYCLE_DLQ_URL: lifecycle.deadLetterUrl,
      SLS_LOCAL_STAGE: stage,
    };
    console.log(`# local services for stage "${stage}"${fleet ? `, fleet of ${fleet.identities.length} nodes` : ""}; Ctrl-C stops them`);
    for (const [name, value] of Object.entries(exports)) console.log(`export ${name}=${value}`);
    if (fleet) console.log(`# nodes: ${fleet.identities.join(" ")}`);
  } catch (error) {
    await stopAll();
    throw error;
  }

  await stopRequested;
  console.log("# stopping local services");
  const failures = await stopAll();
  if (failures.length > 0) throw new Error(`stopped, but not cleanly: ${failures.join("; ")}`);
  console.log("# stopped");
}

/** Resolves when the orderly stop begins (dev/local/stop-signals.ts); a second Ctrl-C forces the exit. */
function untilStopped(): Promise<void> {
  return new Promise((resolve) => {
    watchStopSignals({
      onStop: () => resolve(),
      onForce: () => {
        console.log("# forced exit");
        process.exit(130);
      },
    });
  });
}

// Exit explicitly: a client or socket left open must not keep the process up after a stop.
await main(parseOptions(process.argv.slice(2))).then(
  () => process.exit(0),
  (error: unknown) => {
    // What the machine lacks, or a service that did not start, is the user's to fix: one line, no stack.
    if (error instanceof MissingPrerequisiteError || error instanceof ServiceStartError) {
      console.error(`local services: ${error.message}`);
      process.exit(1);
    }
    console.error(`local services failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
