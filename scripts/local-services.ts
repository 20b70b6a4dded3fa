/**
 * Starts the services a deployment talks to, locally, for `sls invoke local` (docs/deploy.md):
 * nats-server (JetStream, with the CHORIA_LIFECYCLE stream), DynamoDB Local with the lease and
 * admission tables, fauxqs with the host-work and lifecycle queues and their DLQs, and optionally a
 * simulated fleet of provisioning-mode nodes. Prints the `export` lines scripts/sls-local.sh reads,
 * then stays up until Ctrl-C.
 *
 *   npx tsx scripts/local-services.ts [--stage local] [--fleet 5] [--nats-port N] [--dynamodb-port N]
 *
 * Ports are picked free and printed unless given.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createLifecycleStream, createProvisionerTables, createQueueWithDeadLetter } from "../lib/local/resources";
import { LOCAL_AWS, startDynamoDbLocal, startNats, startSqs, type RunningService } from "../lib/local/services";
import { startFleet, type Fleet } from "../lib/simulator";

const SERVICE = "choria-provisioner";
/** The fleet's provisioning token (`cht`); config/local.yaml sends the same. */
const LOCAL_TOKEN = "local-provisioning-token";

function option(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

/** A fixed port when given; otherwise a free one is picked and printed. */
function portOption(name: string): number | undefined {
  const text = option(name);
  if (text === undefined) return undefined;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(`--${name} must be a port number`);
  return port;
}

async function main(): Promise<void> {
  const stage = option("stage") ?? "local";
  const fleetSize = Number(option("fleet") ?? "0");
  if (!Number.isInteger(fleetSize) || fleetSize < 0) throw new Error("--fleet must be a whole number");
  const prefix = `${SERVICE}-${stage}`;
  const running: RunningService[] = [];
  let fleet: Fleet | undefined;

  const stopAll = async () => {
    await fleet?.stop();
    for (const service of running.reverse()) await service.stop();
  };

  try {
    const nats = await startNats({ port: portOption("nats-port") });
    running.push(nats);
    await createLifecycleStream(nats.url);

    const dynamo = await startDynamoDbLocal({ port: portOption("dynamodb-port") });
    running.push(dynamo);
    const dynamoClient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamo.url });
    await createProvisionerTables(dynamoClient, { lease: `${prefix}-lease`, admission: `${prefix}-admission` });
    dynamoClient.destroy();

    const sqs = await startSqs();
    running.push(sqs);
    const attributes = { VisibilityTimeout: "60" };
    const hostWork = createQueueWithDeadLetter(sqs, `${prefix}-host-work`, { maxReceiveCount: 10, attributes });
    const lifecycle = createQueueWithDeadLetter(sqs, `${prefix}-lifecycle`, { maxReceiveCount: 5, attributes });

    if (fleetSize > 0) {
      fleet = await startFleet({ natsUrl: nats.url, count: fleetSize, token: LOCAL_TOKEN, identityPrefix: "node", domain: "local.example.net" });
    }

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

  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  console.log("# stopping local services");
  await stopAll();
}

await main();
