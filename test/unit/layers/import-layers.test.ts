/**
 * The import layers of eslint.config.js, checked on planted files: each forbidden import is
 * reported where it is forbidden and accepted where it belongs, package imports by
 * no-restricted-imports and this repo's own folders by eslint-rules/layers.js (direction between
 * the zones, and no cycles). `npm run lint` holds the real tree to the same rules; this test keeps
 * the rules themselves from going slack.
 */
import { resolve } from "node:path";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..", "..");
const eslint = new ESLint({ cwd: ROOT });

const IMPORT_RULES = new Set(["no-restricted-imports", "layers/direction", "layers/no-cycle"]);

async function restrictedImports(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: resolve(ROOT, filePath) });
  return (result?.messages ?? []).filter((message) => IMPORT_RULES.has(message.ruleId ?? "")).map((message) => message.message);
}

describe("import layers", () => {
  it.each([
    ["lib/app/planted.ts", "nats", 'import { connect } from "nats";\nvoid connect;\n', "lib/nats"],
    ["lib/app/planted.ts", "@aws-sdk/client-sqs", 'import { SQSClient } from "@aws-sdk/client-sqs";\nvoid SQSClient;\n', "lib/aws"],
    ["lib/app/planted.ts", "aws-lambda", 'import type { SQSEvent } from "aws-lambda";\nexport type E = SQSEvent;\n', "lib/aws"],
    ["lib/engine/planted.ts", "@aws-lambda-powertools/logger", 'import { Logger } from "@aws-lambda-powertools/logger";\nvoid Logger;\n', "lib/aws"],
    ["lib/lease/planted.ts", "@middy/core", 'import middy from "@middy/core";\nvoid middy;\n', "lib/aws"],
    ["lib/nats/planted.ts", "@aws-sdk/client-sqs", 'import { SQSClient } from "@aws-sdk/client-sqs";\nvoid SQSClient;\n', "lib/aws"],
    ["lib/aws/planted.ts", "nats", 'import { connect } from "nats";\nvoid connect;\n', "lib/nats"],
    ["lib/config/planted.ts", "../../dev/local/stack", 'import { startStack } from "../../dev/local/stack";\nvoid startStack;\n', "dev/"],
    ["lib/app/planted.ts", "../../handlers/status", 'import { handler } from "../../handlers/status";\nvoid handler;\n', "handlers/"],
    ["handlers/planted.ts", "../lib/engine/provision", 'import { ProvisionEngine } from "../lib/engine/provision";\nvoid ProvisionEngine;\n', "lib/aws"],
    // DynamoDB's packages: lib/dynamodb only, lib/aws (the composition) included.
    ["lib/lease/planted.ts", "@aws-sdk/client-dynamodb", 'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nvoid DynamoDBClient;\n', "lib/dynamodb"],
    ["lib/admission/planted.ts", "@aws-sdk/util-dynamodb", 'import { marshall } from "@aws-sdk/util-dynamodb";\nvoid marshall;\n', "lib/dynamodb"],
    ["lib/app/planted.ts", "@aws-sdk/client-dynamodb", 'import type { AttributeValue } from "@aws-sdk/client-dynamodb";\nexport type V = AttributeValue;\n', "lib/dynamodb"],
    ["lib/nats/planted.ts", "@aws-sdk/client-dynamodb", 'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nvoid DynamoDBClient;\n', "lib/dynamodb"],
    ["lib/aws/planted.ts", "@aws-sdk/client-dynamodb", 'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nvoid DynamoDBClient;\n', "lib/dynamodb"],
    // Between the repo's own folders: each forbidden direction, type-only imports included.
    ["lib/engine/planted.ts", "../app/lifecycle-events", 'import { LifecycleEvents } from "../app/lifecycle-events";\nvoid LifecycleEvents;\n', "a use case belongs in lib/app"],
    ["lib/engine/planted.ts", "../aws/compose", 'import { composeParts } from "../aws/compose";\nvoid composeParts;\n', "AWS code in lib/aws"],
    ["lib/lease/planted.ts", "../nats/broker", 'import type { ChoriaBroker } from "../nats/broker";\nexport type B = ChoriaBroker;\n', "NATS code in lib/nats"],
    ["lib/choria/planted.ts", "../app/use-case-ports", 'import type { Broker } from "../app/use-case-ports";\nexport type B = Broker;\n', "a use case belongs in lib/app"],
    ["lib/observability/planted.ts", "../aws/settings", 'import type { AppSettings } from "../aws/settings";\nexport type S = AppSettings;\n', "AWS code in lib/aws"],
    ["lib/app/planted.ts", "../aws/compose", 'import { composeParts } from "../aws/compose";\nvoid composeParts;\n', "the AWS adapter belongs in lib/aws"],
    ["lib/app/planted.ts", "../nats/broker", 'import type { ChoriaBroker } from "../nats/broker";\nexport type B = ChoriaBroker;\n', "the NATS adapter in lib/nats"],
    ["lib/app/planted.ts", "../dynamodb/lease-store", 'import { DynamoDbLeaseStore } from "../dynamodb/lease-store";\nvoid DynamoDbLeaseStore;\n', "DynamoDB code in lib/dynamodb"],
    ["lib/lease/planted.ts", "../dynamodb/lease-store", 'import type { DynamoDbLeaseStore } from "../dynamodb/lease-store";\nexport type S = DynamoDbLeaseStore;\n', "DynamoDB code in lib/dynamodb"],
    ["lib/nats/planted.ts", "../dynamodb/client", 'import type { DynamoDBClient } from "../dynamodb/client";\nexport type C = DynamoDBClient;\n', "belongs in lib/aws"],
    ["lib/dynamodb/planted.ts", "../aws/settings", 'import type { AppSettings } from "../aws/settings";\nexport type S = AppSettings;\n', "belongs in lib/aws"],
    ["lib/dynamodb/planted.ts", "../nats/broker", 'import type { ChoriaBroker } from "../nats/broker";\nexport type B = ChoriaBroker;\n', "belongs in lib/aws"],
    ["lib/nats/planted.ts", "../aws/settings", 'import type { AppSettings } from "../aws/settings";\nexport type S = AppSettings;\n', "belongs in lib/aws"],
    ["lib/aws/planted.ts", "../../cli/cli", 'import { runCli } from "../../cli/cli";\nvoid runCli;\n', "belong in cli/"],
    // A type-only import that closes a loop: lib/config/config.ts imports keys.ts, whose types come from types.ts.
    ["lib/config/keys.ts", "./config", 'import type { ParseConfigOptions } from "./config";\nexport type O = ParseConfigOptions;\n', "a module of its own"],
  ])("%s: importing %s is refused, naming where it belongs", async (file, _module, code, belongs) => {
    const messages = await restrictedImports(file, code);

    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain(belongs);
  });

  it.each([
    ["lib/nats/planted.ts", "nats", 'import { connect } from "nats";\nvoid connect;\n'],
    ["lib/aws/planted.ts", "@aws-sdk/client-sqs", 'import { SQSClient } from "@aws-sdk/client-sqs";\nvoid SQSClient;\n'],
    ["lib/dynamodb/planted.ts", "@aws-sdk/client-dynamodb", 'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nvoid DynamoDBClient;\n'],
    ["lib/dynamodb/planted.ts", "@aws-sdk/util-dynamodb", 'import { marshall } from "@aws-sdk/util-dynamodb";\nvoid marshall;\n'],
    ["lib/aws/planted.ts", "../dynamodb/lease-store", 'import { DynamoDbLeaseStore } from "../dynamodb/lease-store";\nvoid DynamoDbLeaseStore;\n'],
    ["lib/dynamodb/planted.ts", "../app/use-case-ports", 'import type { RenewalStore } from "../app/use-case-ports";\nexport type S = RenewalStore;\n'],
    ["lib/dynamodb/planted.ts", "../ports/lease-store", 'import type { LeaseStore } from "../ports/lease-store";\nexport type S = LeaseStore;\n'],
    ["handlers/planted.ts", "../lib/aws/functions/status", 'import { handler } from "../lib/aws/functions/status";\nvoid handler;\n'],
    ["dev/local/planted.ts", "../../handlers/status", 'import { handler } from "../../handlers/status";\nvoid handler;\n'],
    ["lib/nats/planted.ts", "../app/use-case-ports", 'import type { Broker } from "../app/use-case-ports";\nexport type B = Broker;\n'],
    ["lib/aws/planted.ts", "../nats/broker", 'import { ChoriaBroker } from "../nats/broker";\nvoid ChoriaBroker;\n'],
    ["lib/app/planted.ts", "../choria/identity", 'import { identityProblem } from "../choria/identity";\nvoid identityProblem;\n'],
    ["cli/planted.ts", "../lib/aws/operator-stack", 'import { openOperator } from "../lib/aws/operator-stack";\nvoid openOperator;\n'],
  ])("%s may import %s", async (file, _module, code) => {
    expect(await restrictedImports(file, code)).toEqual([]);
  });
});
