/**
 * A host that fails at the same step HOST_FAILURE_LIMIT times in a row is parked: its work lands in
 * the host-work DLQ with the last error, and no discovery admits it again. Real NATS, DynamoDB
 * Local and fauxqs, with a helper that cannot run.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import type { StatusFunctionReport } from "../../../lib/app/operator/functions";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as discoverHandler } from "../../../handlers/discover";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { makeHandler as statusHandler } from "../../../handlers/status";
import { lambdaContext, receive, sqsEvent, servicesForSuite, type Queues } from "../../support/aws";
import { startDeployment, TOKEN, type Deployment } from "../../support/handlers";

const LIMIT = 3;
const services = servicesForSuite();
let fleet: Fleet;
let deployment: Deployment;
let queues: Queues;

beforeAll(async () => {
  const resources = await services.resources(`parking-${Date.now()}`);
  queues = resources.queues;
  fleet = await startFleet({ natsUrl: services.nats.url, identities: ["p1.example.net", "p2.example.net"], token: TOKEN, restartDelayMs: 50 });
  deployment = await startDeployment({
    site: "parking",
    deploymentId: "leader",
    natsUrl: services.nats.url,
    resources,
    helper: "/nonexistent/provision-helper",
  });
});

afterAll(async () => {
  await deployment?.app.close();
  await fleet?.stop();
});

describe("a host failing at the same step", () => {
  it(`is parked in the DLQ with its last error after ${LIMIT} failures in a row, and not admitted again`, async () => {
    const getApp = async () => deployment.app;
    const discover = discoverHandler(getApp);
    const provision = provisionHandler(getApp);
    const attempts: number[] = [];

    for (let round = 1; round <= LIMIT + 1; round++) {
      const { admitted } = await discover({}, lambdaContext());
      attempts.push(admitted);
      const messages = await receive(services.sqsApi, queues.hostWork);
      if (messages.length > 0) {
        const response = await provision(sqsEvent(messages, queues.hostWork), lambdaContext());
        expect(response.batchItemFailures).toEqual([]);
      }
    }
    const dead = await receive(services.sqsApi, queues.hostWorkDlq);
    const status = (await statusHandler(getApp)({}, lambdaContext())) as StatusFunctionReport;

    // Two hosts admitted in each of the three failing rounds, none after they were parked.
    expect(attempts).toEqual([2, 2, 2, 0]);
    expect(dead.map((message) => decodeHostWork(message.Body ?? "").identity).sort()).toEqual(["p1.example.net", "p2.example.net"]);
    for (const message of dead) {
      const attributes = message.MessageAttributes ?? {};
      expect(attributes.step?.StringValue).toBe("helper");
      expect(attributes.failures?.StringValue).toBe(String(LIMIT));
      expect(attributes.reason?.StringValue).toMatch(/^helper: cannot start \/nonexistent\/provision-helper: no such file \(ENOENT\)/);
    }
    expect(deployment.metrics.total(EXTRA_METRIC.hostsParked)).toBe(2);
    expect(status.registry.byState.parked).toBe(2);
    expect(status.registry.lastErrors).toEqual([
      expect.objectContaining({ state: "parked", failedStep: "helper", failures: LIMIT }),
      expect.objectContaining({ state: "parked", failedStep: "helper", failures: LIMIT }),
    ]);
    expect(fleet.record.filter((entry) => entry.action === "configure")).toEqual([]);
  });
});
