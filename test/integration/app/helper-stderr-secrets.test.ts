/**
 * A helper that fails after printing secrets to stderr (the private key it was about to return,
 * the provisioning token, a configured secret) puts none of them where the failure lands: the
 * dead-letter attributes, the admission table, `status`, the log. Real NATS, DynamoDB Local and fauxqs.
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { servicesForSuite, type LocalResources } from "../../support/aws";
import { startDeployment, TOKEN, type Deployment } from "../../support/handlers";
import { provisionUntilParked } from "../../support/parked-failure";

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
    const { dead, status, landed } = await provisionUntilParked({ services, resources, deployment, logLines, rounds: LIMIT });

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
