/**
 * The import layers of eslint.config.js, checked on planted files: each forbidden import is
 * reported where it is forbidden and accepted where it belongs. `npm run lint` holds the real tree to
 * the same rules; this test keeps the rules themselves from going slack.
 */
import { resolve } from "node:path";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..", "..");
const eslint = new ESLint({ cwd: ROOT });

async function restrictedImports(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: resolve(ROOT, filePath) });
  return (result?.messages ?? []).filter((message) => message.ruleId === "no-restricted-imports").map((message) => message.message);
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
    ["handlers/planted.ts", "../lib/engine", 'import { ProvisionEngine } from "../lib/engine";\nvoid ProvisionEngine;\n', "lib/aws"],
  ])("%s: importing %s is refused, naming where it belongs", async (file, _module, code, belongs) => {
    const messages = await restrictedImports(file, code);

    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain(belongs);
  });

  it.each([
    ["lib/nats/planted.ts", "nats", 'import { connect } from "nats";\nvoid connect;\n'],
    ["lib/aws/planted.ts", "@aws-sdk/client-sqs", 'import { SQSClient } from "@aws-sdk/client-sqs";\nvoid SQSClient;\n'],
    ["lib/lease/dynamodb-planted.ts", "@aws-sdk/client-dynamodb", 'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nvoid DynamoDBClient;\n'],
    ["handlers/planted.ts", "../lib/aws/functions/status", 'import { handler } from "../lib/aws/functions/status";\nvoid handler;\n'],
    ["dev/local/planted.ts", "../../handlers/status", 'import { handler } from "../../handlers/status";\nvoid handler;\n'],
  ])("%s may import %s", async (file, _module, code) => {
    expect(await restrictedImports(file, code)).toEqual([]);
  });
});
