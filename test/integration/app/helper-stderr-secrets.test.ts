/**
 * A helper that fails after printing secrets to stderr (the private key it was about to return,
 * the provisioning token, a configured secret) puts none of them where the failure lands: the
 * dead-letter attributes, the admission table, `status`, the log. Real NATS, DynamoDB Local and fauxqs.
 */
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusReport } from "../../../lib/app";
import { createConsoleLogger } from "../../../lib/observability";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as discoverHandler } from "../../../handlers/discover";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { makeHandler as statusHandler } from "../../../handlers/status";
import { lambdaContext, receive, sqsEvent, servicesForSuite, type LocalResources } from "../../support/aws";
import { startDeployment, TOKEN, type Deployment } from "../../support/handlers";

const LIMIT = 3;
const NATS_TOKEN = "configured-nats-token-0815-secret";
const PEM_ROWS = ["MC4CAQAwBQYDK2VwBCIEIKzM0b1Hc4cGd2lqR0xxb3pnTjFrUEZzV2ZiYmNk", "QWxzb0FTZWNvbmRMaW5lT2ZUaGVQcml2YXRlS2V5MDEyMzQ1Njc4OWFiY2Rl"];
const PEM = `-----BEGIN PRIVATE KEY-----\n${PEM_ROWS.join("\n")}\n-----END PRIVATE KEY-----`;
const SECRETS = [TOKEN, NATS_TOKEN, ...PEM_ROWS];

const services = servicesForSuite();
let fleet: Fleet;
let deployment: Deployment;
let resources: LocalResources;
let dir: string;
const logLines: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "leaky-helper-"));
  const helper = join(dir, "leaky-helper.sh");
  await writeFile(
    helper,
    [
      "#!/bin/sh",
      "cat > /dev/null",
      // The start of the response it was writing when it gave up: the key it would have returned.
      `printf '%s' '{"key": ${JSON.stringify(PEM)}, "configuration": {"a": "b"'`,
      "echo 'about to return the key:' >&2",
      ...PEM.split("\n").map((line) => `echo '${line}' >&2`),
      `echo 'the token is ${TOKEN}, nats ${NATS_TOKEN}' >&2`,
      "exit 1",
    ].join("\n"),
  );
  await chmod(helper, 0o755);
  resources = await services.resources(`leaky-${Date.now()}`);
  fleet = await startFleet({ natsUrl: services.nats.url, identities: ["s1.example.net"], token: TOKEN, restartDelayMs: 50 });
  deployment = await startDeployment({
    site: "leaky",
    deploymentId: "leader",
    natsUrl: services.nats.url,
    resources,
    helper,
    // A configured secret the helper happens to print; a broker without authentication ignores it.
    extraYaml: `nats_token: ${NATS_TOKEN}`,
    logger: createConsoleLogger({ level: "debug", write: (line) => logLines.push(line) }),
  });
});

afterAll(async () => {
  await deployment?.app.close();
  await fleet?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("a helper that prints secrets to stderr and fails", () => {
  it("leaves no secret in the DLQ attributes, the table, status or the log", async () => {
    const getApp = async () => deployment.app;
    const discover = discoverHandler(getApp);
    const provision = provisionHandler(getApp);
    for (let round = 1; round <= LIMIT; round++) {
      await discover({}, lambdaContext());
      const messages = await receive(services.sqsApi, resources.queues.hostWork);
      if (messages.length > 0) await provision(sqsEvent(messages, resources.queues.hostWork), lambdaContext());
    }

    const dead = await receive(services.sqsApi, resources.queues.hostWorkDlq);
    const table = await services.dynamo.send(new ScanCommand({ TableName: resources.tables.admission }));
    const status = (await statusHandler(getApp)({}, lambdaContext())) as StatusReport;

    const landed = {
      dlq: JSON.stringify(dead.map((message) => message.MessageAttributes)),
      table: JSON.stringify(table.Items),
      status: JSON.stringify(status),
      log: logLines.join("\n"),
    };
    for (const [where, text] of Object.entries(landed)) {
      for (const secret of SECRETS) expect(text.includes(secret), `${where} holds ${secret}`).toBe(false);
    }
    // The failure did land in each of them, with the helper's masked stderr.
    expect(dead).toHaveLength(1);
    const reason = dead[0]?.MessageAttributes?.reason?.StringValue ?? "";
    expect(reason).toMatch(/^helper: \S+leaky-helper\.sh exited with code 1; stderr: /);
    expect(reason).toContain("the token is [redacted], nats [redacted]");
    expect(landed.table).toContain("the token is [redacted]");
    expect(status.registry.lastErrors).toEqual([expect.objectContaining({ identity: "s1.example.net", failedStep: "helper" })]);
  });
});
