import { describe, expect, it } from "vitest";
import { parseLifecycleEvent, type LifecycleEvent } from "../../../lib/choria/lifecycle";
import { type Fleet, startFleet } from "../../../dev/simulator";
import { discoverer, FLEET_TOKEN } from "../../support/simulator";
import { brokerForSuite } from "../../support/suite";

describe("fleet discovery and announcements", () => {
  const broker = brokerForSuite();

  it.each([
    [1, 1],
    [100, 1],
    [100, 2],
    [2000, 1],
  ] as const)("discovery finds exactly the %i simulated nodes (protocol v%i)", async (count, version) => {
    const fleet = await startFleet({ natsUrl: broker.nats.url, token: FLEET_TOKEN, count, protocolVersion: version, identityPrefix: `d${count}v${version}-` });
    try {
      const found = await discoverer(broker.nc, version).discover();

      expect([...found].sort()).toEqual([...fleet.identities].sort());
    } finally {
      await fleet.stop();
    }
  });

  // go-choria builddefaults SetBuildBasedOnJWT: a provisioning.jwt without a token, without broker
  // URLs or that is not a provisioning token configures nothing, so no provisioning mode at all.
  it.each([
    [{ token: "" }, "no auth token"],
    [{ jwtClaims: { chu: undefined } }, "no srv domain or urls"],
    [{ jwtClaims: { sub: undefined, purpose: undefined } }, "token is not a provisioning token"],
  ] as const)("nodes whose provisioning.jwt does not configure provisioning are never found (%j)", async (options, reason) => {
    const fleet = await startFleet({ natsUrl: broker.nats.url, token: FLEET_TOKEN, count: 3, identityPrefix: `refused-${reason.length}-`, ...options });
    try {
      const found = await discoverer(broker.nc, 1).discover();

      expect(found).toEqual([]);
      expect(fleet.provisioningJwtRefused).toBe(reason);
      expect(fleet.lifecycleEvents).toEqual([]);
      expect(fleet.identities.map((identity) => fleet.node(identity).inProvisioningMode)).toEqual([false, false, false]);
    } finally {
      await fleet.stop();
    }
  });

  it("a v1 fleet stays silent for v2 discovery", async () => {
    const fleet = await startFleet({ natsUrl: broker.nats.url, token: FLEET_TOKEN, count: 5, protocolVersion: 1, identityPrefix: "mixed-" });
    try {
      const found = await discoverer(broker.nc, 2).discover();

      expect(found).toEqual([]);
      expect(fleet.record.filter((entry) => entry.agent === "discovery").map((entry) => entry.reason)).toEqual(
        Array(5).fill("protocol v2 request on a protocol v1 server"),
      );
    } finally {
      await fleet.stop();
    }
  });

  it.each(["cloudevents", "choria"] as const)("publishes a %s startup event per node on start", async (format) => {
    const events: Array<{ subject: string; event: LifecycleEvent; cloudEvent: boolean }> = [];
    const subscription = broker.nc.subscribe("choria.lifecycle.event.>", {
      callback: (_error, message) => {
        const text = new TextDecoder().decode(message.data);
        events.push({ subject: message.subject, event: parseLifecycleEvent(message.data), cloudEvent: text.includes('"specversion"') });
      },
    });
    await broker.nc.flush();

    const fleet = await startFleet({ natsUrl: broker.nats.url, token: FLEET_TOKEN, count: 3, lifecycleFormat: format, identityPrefix: `life-${format}-`, version: "0.30.1" });
    try {
      await fleet.waitFor(() => events.length >= 3);

      expect(events.map((entry) => entry.subject)).toEqual(Array(3).fill("choria.lifecycle.event.startup.provision_mode_server"));
      expect(events.map((entry) => entry.event.identity).sort()).toEqual([...fleet.identities].sort());
      expect(events.every((entry) => entry.event.type === "startup" && entry.event.version === "0.30.1")).toBe(true);
      expect(events.every((entry) => entry.cloudEvent === (format === "cloudevents"))).toBe(true);
    } finally {
      subscription.unsubscribe();
      await fleet.stop();
    }
  });

  it("adds nodes at runtime that discovery then finds", async () => {
    const fleet: Fleet = await startFleet({ natsUrl: broker.nats.url, token: FLEET_TOKEN, count: 2, identityPrefix: "grow-", nodesPerConnection: 2 });
    try {
      const added = await fleet.addNodes(3);
      const found = await discoverer(broker.nc, 1).discover();

      expect(added).toEqual(["grow-3.example.net", "grow-4.example.net", "grow-5.example.net"]);
      expect([...found].sort()).toEqual([...fleet.identities].sort());
    } finally {
      await fleet.stop();
    }
  });
});
