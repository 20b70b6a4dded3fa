/**
 * Discovery admission is bounded: forged replies from one hostile client on the provisioning broker
 * admit at most `discovery_max_nodes` hosts per discovery, and hitting the cap is logged and counted.
 */
import { randomUUID } from "node:crypto";
import { connect, type NatsConnection } from "nats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../../../lib/aws";
import { decodeRequest, encodeReply } from "../../../lib/choria/protocol";
import { InMemoryMetrics } from "../../../lib/observability";
import { EXTRA_METRIC } from "../../../lib/ports";
import { RecordingLogger } from "../../support/fakes";
import { localAppSettings } from "../../support/app-settings";
import { receive, servicesForSuite } from "../../support/aws";
import { HELPER } from "../handlers/support";

const services = servicesForSuite();
let hostile: NatsConnection;

beforeAll(async () => {
  hostile = await connect({ servers: services.nats.url });
});

afterAll(async () => {
  await hostile?.close();
});

describe("discovery_max_nodes", () => {
  it("admits at most the cap from 2,005 forged replies, and logs and counts the capped discovery", async () => {
    // Arrange: a client that answers every discovery with 2,005 replies naming made-up nodes.
    hostile.subscribe("provisioning.broadcast.agent.discovery", {
      callback: (_error, message) => {
        const request = decodeRequest(message.data);
        for (let index = 0; index < 2_005; index++) {
          hostile.publish(
            request.replyTo,
            encodeReply({ version: request.version, requestId: request.id, senderId: `forged-${index}.example.net`, agent: "discovery", payload: new TextEncoder().encode("pong"), timeMs: Date.now() }),
          );
        }
      },
    });
    await hostile.flush();
    const site = `cap-${randomUUID().slice(0, 8)}`;
    const resources = await services.resources(site);
    const yaml = [`site: ${site}`, "deployment_id: east", `helper: ${HELPER}`, "choria_insecure: true", "leader_election: true", "discovery_max_nodes: 50", `broker_urls: ["${services.nats.url}"]`].join("\n");
    const metrics = new InMemoryMetrics(site);
    const logger = new RecordingLogger();
    const app = await createApp(localAppSettings(yaml, resources), { metrics, logger });

    try {
      // Act
      const result = await app.discover({ remainingMs: () => 25_000 });

      // Assert
      expect(result).toMatchObject({ paused: false, discovered: 50, admitted: 50 });
      expect((await receive(services.sqsApi, resources.queues.hostWork, 3_000)).length).toBe(50);
      expect(metrics.total(EXTRA_METRIC.discoveryCapped)).toBe(1);
      expect(logger.at("warn").find((warning) => warning.message.includes("discovery_max_nodes"))?.attributes).toMatchObject({ maxNodes: 50 });
    } finally {
      await app.close();
    }
  });
});
