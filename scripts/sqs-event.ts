/**
 * Builds an SQS event file for `sls invoke local --path event.json` (scripts/sls-local.sh):
 *
 *   node --import tsx scripts/sqs-event.ts --from-queue "$HOST_WORK_QUEUE_URL" > event.json
 *       the messages waiting on a queue (e.g. the host work `discover` just queued), hidden for
 *       --hide seconds (default 300) so no one else receives them meanwhile, as the event source
 *       mapping would hand them over; at most --max (default 10)
 *   node --import tsx scripts/sqs-event.ts --startup node1.local.example.net [--component NAME] > event.json
 *       lifecycle startup events for the `lifecycle` function (component default provision_mode_server)
 *   node --import tsx scripts/sqs-event.ts --tick > event.json
 *       a tick due now for the `lifecycle` function: a lease round, then the startup events waiting
 *       on the broker (the keeper arms them on the lifecycle queue, delayed; this one is not)
 *   node --import tsx scripts/sqs-event.ts --host-work node1.local.example.net --term 3 > event.json
 *       host-work messages made up here: `provision` works them only if the host was admitted under
 *       that term at that moment, so use --from-queue for real work; this shows the discard rules
 *
 * SQS_ENDPOINT (printed by the local services) is where --from-queue receives from.
 */
import { parseArgs } from "node:util";
import { ReceiveMessageCommand, SQSClient, type Message } from "@aws-sdk/client-sqs";
import { LOCAL_AWS } from "../dev/local/services";
import { hostWorkBodies, queueArnOf, sqsEventFromBodies, sqsEventFromMessages, startupEventBodies, tickBodies } from "../dev/local/sqs-event";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";

const USAGE = `Usage: node --import tsx scripts/sqs-event.ts <source> > event.json

  --from-queue URL [--max N] [--hide S]
                       the messages waiting on a queue, hidden for S seconds (default 300), at most N (default 10)
  --startup <identity>... [--component NAME]
                       lifecycle startup events (component default provision_mode_server)
  --tick               a tick due now (a lease round, then the startup events waiting on the broker)
  --host-work --term N <identity>...
                       host-work messages made up here (provision works them only if admitted under that term)
  --queue-url URL      the queue the event names as its source (default a local one)
  --help

SQS_ENDPOINT is where --from-queue receives from.
`;

/** A usage mistake: exit 2, as in every command of the project. */
function fail(message: string): never {
  process.stderr.write(`sqs-event: ${message} (see --help)\n`);
  process.exit(2);
}

async function receive(queueUrl: string, max: number, hideSeconds: number): Promise<Message[]> {
  const endpoint = process.env.SQS_ENDPOINT;
  const client = new SQSClient(endpoint ? { ...LOCAL_AWS, endpoint } : {});
  try {
    const messages: Message[] = [];
    while (messages.length < max) {
      const { Messages = [] } = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: Math.min(10, max - messages.length),
          VisibilityTimeout: hideSeconds,
          WaitTimeSeconds: messages.length === 0 ? 2 : 0,
          MessageSystemAttributeNames: ["All"],
          MessageAttributeNames: ["All"],
        }),
      );
      if (Messages.length === 0) break;
      messages.push(...Messages);
    }
    return messages;
  } finally {
    client.destroy();
  }
}

function parse() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        "from-queue": { type: "string" },
        max: { type: "string" },
        hide: { type: "string" },
        startup: { type: "boolean" },
        component: { type: "string" },
        tick: { type: "boolean" },
        "host-work": { type: "boolean" },
        term: { type: "string" },
        "queue-url": { type: "string" },
        help: { type: "boolean" },
      },
    });
  } catch (error) {
    fail((error as Error).message);
  }
}

async function main(): Promise<void> {
  const { values, positionals } = parse();
  if (values.help) {
    process.stdout.write(USAGE);
    return;
  }
  const whole = (name: string, text: string | undefined, fallback: number) => {
    if (text === undefined) return fallback;
    if (!/^\d+$/.test(text)) fail(`--${name} must be a whole number`);
    return Number(text);
  };
  const queueUrl = values["from-queue"] ?? values["queue-url"] ?? "https://sqs.us-east-1.amazonaws.com/000000000000/local";
  let event;
  if (values["from-queue"]) {
    const messages = await receive(values["from-queue"], whole("max", values.max, 10), whole("hide", values.hide, 300));
    if (messages.length === 0) {
      // Not a usage mistake: the command was right, the queue is empty.
      process.stderr.write(`sqs-event: no message is waiting on ${values["from-queue"]}\n`);
      process.exit(1);
    }
    event = sqsEventFromMessages(messages, queueArnOf(queueUrl));
  } else if (values.startup) {
    if (positionals.length === 0) fail("--startup needs one or more identities");
    event = sqsEventFromBodies(startupEventBodies(positionals, values.component ?? "provision_mode_server"), queueArnOf(queueUrl));
  } else if (values.tick) {
    event = sqsEventFromBodies(await tickBodies(), queueArnOf(queueUrl));
  } else if (values["host-work"]) {
    if (positionals.length === 0 || values.term === undefined) fail("--host-work needs --term and one or more identities");
    event = sqsEventFromBodies(hostWorkBodies(positionals, whole("term", values.term, 0)), queueArnOf(queueUrl));
  } else {
    fail("give --from-queue URL, --startup <identity>..., --tick or --host-work --term N <identity>...");
  }
  process.stdout.write(`${JSON.stringify(event, null, 2)}\n`);
}

await main();
