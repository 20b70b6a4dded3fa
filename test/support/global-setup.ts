import type { TestProject } from "vitest/node";
import { startDynamoDbLocal, type RunningDynamoDb } from "../../dev/local/services";
import { startedOnOwnPort } from "./port-clash";

// One DynamoDB Local JVM serves the whole run (it takes seconds to start); suites isolate
// themselves with their own table names. NATS and SQS are cheap and started per suite.
let dynamo: RunningDynamoDb | undefined;

export async function setup(project: TestProject): Promise<void> {
  // The JVM binds its port seconds after it was picked, and its readiness check is answered by any
  // HTTP server there: another run beside this one may have taken the port (port-clash.ts).
  dynamo = await startedOnOwnPort((port) => startDynamoDbLocal({ port }), (started) => started.stop());
  project.provide("dynamoEndpoint", dynamo.url);
  project.provide("dynamoPort", dynamo.port);
}

export async function teardown(): Promise<void> {
  await dynamo?.stop();
}

declare module "vitest" {
  export interface ProvidedContext {
    dynamoEndpoint: string;
    dynamoPort: number;
  }
}
