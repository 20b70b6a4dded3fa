/**
 * A discovery that leaves names out continues at once (lib/app/discovery-continuation.ts): a fleet
 * larger than one discovery admits (here, over a budget of 10 new names a discovery) is admitted
 * whole by the continuations the lifecycle function runs, under the same term, instead of the rest
 * waiting for the next scheduled discovery. Real NATS, DynamoDB Local, fauxqs and simulated nodes.
 */
import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as lifecycleHandler } from "../../../handlers/lifecycle";
import { decodeHostWork } from "../../../lib/app/host-work-message";
import { parseContinuation } from "../../../lib/app/discovery-continuation";
import { deliverOnce, lambdaContext, receive, servicesForSuite } from "../../support/aws";
import { startDeployment, TOKEN } from "../../support/handlers";

const services = servicesForSuite();
let fleet: Fleet | undefined;

afterEach(async () => {
  await fleet?.stop();
  fleet = undefined;
});

const NODES = 25;
const BUDGET = 10;
/** The configured `interval` (the default): the scheduled discovery's period. */
const INTERVAL_MS = 60_000;

describe("discovery continuation", () => {
  it("admits a fleet larger than one discovery's budget through continuations under the same term, within one interval of the scheduled discovery", async () => {
    // Arrange: 25 nodes in provisioning mode; a deployment that admits 10 new names a discovery, unpaced.
    const identities = Array.from({ length: NODES }, (_, index) => `node${index}.example.net`);
    fleet = await startFleet({ natsUrl: services.nats.url, identities, token: TOKEN, restartDelayMs: 50, recordDiscovery: false });
    const site = `cont-${randomUUID().slice(0, 8)}`;
    const resources = await services.resources(site);
    const extraYaml = [`discovery_new_names_per_interval: ${BUDGET}`, "discovery_backlog: 0s"].join("\n");
    const deployment = await startDeployment({ site, deploymentId: "east", natsUrl: services.nats.url, resources, extraYaml });
    const lifecycle = lifecycleHandler(async () => deployment.app);
    const continuationsSeen: number[] = [];

    try {
      // Act: the scheduled discovery, then the lifecycle function on what its queue holds, as the event
      // source mapping polls it, until the queue is empty (each continuation admits 10 more: at most three polls).
      const scheduled = await deployment.app.discover({ remainingMs: () => 25_000 });
      for (let poll = 0; poll < Math.ceil(NODES / BUDGET); poll++) {
        const delivered = await deliverOnce(services.sqsApi, resources.queues.lifecycle, async (event) => {
          for (const record of event.Records) continuationsSeen.push(parseContinuation(record.body)?.term ?? -1);
          return lifecycle(event, lambdaContext(30_000));
        });
        if (delivered.received === 0) break;
        expect(delivered.failed).toBe(0);
      }

      // Assert: at the host-work queue: every node once, all under the scheduled discovery's term,
      // none admitted an interval or more after it (no node waited for the next scheduled discovery).
      const works = (await receive(services.sqsApi, resources.queues.hostWork, 100)).map((message) => decodeHostWork(message.Body ?? ""));
      expect(scheduled).toMatchObject({ paused: false, admitted: BUDGET });
      expect(continuationsSeen).toEqual([scheduled.term, scheduled.term]);
      expect(works.map((work) => work.identity).sort()).toEqual([...identities].sort());
      expect(new Set(works.map((work) => work.term))).toEqual(new Set([scheduled.term]));
      const firstAdmittedAt = Math.min(...works.map((work) => work.admittedAt));
      expect(Math.max(...works.map((work) => work.admittedAt)) - firstAdmittedAt).toBeLessThan(INTERVAL_MS);
      expect(await receive(services.sqsApi, resources.queues.lifecycle, 10)).toEqual([]);
    } finally {
      await deployment.app.close();
    }
  });
});
