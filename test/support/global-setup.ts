import type { TestProject } from "vitest/node";
import { startDynamoDbLocal, type RunningDynamoDb } from "../../dev/local/services";

// One DynamoDB Local JVM serves the whole run (it takes seconds to start); suites isolate
// themselves with their own table names. NATS and SQS are cheap and started per suite.
let dynamo: RunningDynamoDb | undefined;

export async function setup(project: TestProject): Promise<void> {
  dynamo = await startDynamoDbLocal();
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
