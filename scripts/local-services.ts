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
import { GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { connect } from "nats";
import { createAdmissionTable } from "../lib/admission/dynamodb-admission-store";
import { createLeaseTable } from "../lib/lease/dynamodb-lease-store";
import { LOCAL_AWS, startDynamoDbLocal, startNats, startSqs, type RunningService } from "../lib/local/services";
import { startFleet, type Fleet } from "../lib/simulator";

const SERVICE = "choria-provisioner";
const LIFECYCLE_STREAM = "CHORIA_LIFECYCLE";

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

async function queueArn(sqs: SQSClient, url: string): Promise<string> {
  const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }));
  if (!Attributes?.QueueArn) throw new Error(`fauxqs returned no QueueArn for ${url}`);
  return Attributes.QueueArn;
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
    const nc = await connect({ servers: nats.url });
    await (await nc.jetstreamManager()).streams.add({ name: LIFECYCLE_STREAM, subjects: ["choria.lifecycle.event.>"] });
    await nc.drain();

    const dynamo = await startDynamoDbLocal({ port: portOption("dynamodb-port") });
    running.push(dynamo);
    const dynamoClient = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamo.url });
    await createLeaseTable(dynamoClient, `${prefix}-lease`);
    await createAdmissionTable(dynamoClient, `${prefix}-admission`);
    dynamoClient.destroy();

    const sqs = await startSqs();
    running.push(sqs);
    const sqsClient = new SQSClient({ ...LOCAL_AWS, endpoint: sqs.url });
    const hostWorkDlq = sqs.createQueue(`${prefix}-host-work-dlq`);
    const lifecycleDlq = sqs.createQueue(`${prefix}-lifecycle-dlq`);
    const redrive = async (dlq: string, maxReceiveCount: number) => ({
      VisibilityTimeout: "60",
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: await queueArn(sqsClient, dlq), maxReceiveCount }),
    });
    const hostWork = sqs.createQueue(`${prefix}-host-work`, await redrive(hostWorkDlq, 10));
    const lifecycle = sqs.createQueue(`${prefix}-lifecycle`, await redrive(lifecycleDlq, 5));
    sqsClient.destroy();

    if (fleetSize > 0) {
      fleet = await startFleet({ natsUrl: nats.url, count: fleetSize, identityPrefix: "node", domain: "local.example.net" });
    }

    const exports: Record<string, string> = {
      PROVISIONER_BROKER_URLS: nats.url,
      DYNAMODB_ENDPOINT: dynamo.url,
      SQS_ENDPOINT: sqs.url,
      HOST_WORK_QUEUE_URL: hostWork,
      HOST_WORK_DLQ_URL: hostWorkDlq,
      LIFECYCLE_QUEUE_URL: lifecycle,
      LIFECYCLE_DLQ_URL: lifecycleDlq,
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
