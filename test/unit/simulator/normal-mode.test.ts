import { describe, expect, it } from "vitest";
import { harness, type Reply } from "./support";

const PROVISIONED = { "plugin.choria.server.provision": "false" };

function normalCall(h: ReturnType<typeof harness>, data: unknown, collective = "mcollective") {
  const body = new TextEncoder().encode(JSON.stringify({ agent: "choria_provision", action: "reprovision", data }));
  return h.node.handleNormal(h.request("choria_provision", body, { collective })).then((reply) =>
    reply ? (JSON.parse(new TextDecoder().decode(reply.payload)) as Reply) : undefined,
  );
}

describe("a provisioned node in normal mode", () => {
  it("answers reprovision with the token by going back into provisioning mode after its restart", async () => {
    // Arrange
    const h = harness({ initialConfig: PROVISIONED });
    expect(h.node.inNormalMode).toBe(true);

    // Act
    const reply = await normalCall(h, { token: "s3cret" });
    await h.clock.advance(2_000);

    // Assert
    expect(reply).toMatchObject({ statuscode: 0, data: { message: "Restarting after 2s" } });
    expect(h.node.files.config["plugin.choria.server.provision"]).toBe("1");
    expect(h.node.inProvisioningMode).toBe(true);
    expect(h.node.inNormalMode).toBe(false);
    expect(h.events.map((event) => event.type)).toEqual(["shutdown", "startup"]);
    expect(h.records.at(-1)).toMatchObject({ action: "reprovision", outcome: 0 });
  });

  it("refuses a wrong token and stays in normal mode", async () => {
    // Arrange
    const h = harness({ initialConfig: PROVISIONED });

    // Act
    const reply = await normalCall(h, { token: "wrong" });
    await h.clock.advance(20_000);

    // Assert
    expect(reply).toMatchObject({ statuscode: 1, statusmsg: "Incorrect provision token supplied" });
    expect(h.node.inNormalMode).toBe(true);
  });

  it("refuses as its RPC authorization says (a status fault) and stays in normal mode", async () => {
    // Arrange
    const h = harness({
      initialConfig: PROVISIONED,
      faults: { status: { reprovision: { statuscode: 1, statusmsg: "You are not authorized to call this agent or action" } } },
    });

    // Act
    const reply = await normalCall(h, { token: "s3cret" });

    // Assert
    expect(reply).toMatchObject({ statuscode: 1, statusmsg: "You are not authorized to call this agent or action" });
    expect(h.node.inNormalMode).toBe(true);
  });

  it("drops requests on another collective, and answers nothing in normal mode while in provisioning mode", async () => {
    // Arrange
    const normal = harness({ initialConfig: PROVISIONED });
    const provisioning = harness();

    // Act
    const elsewhere = await normalCall(normal, { token: "s3cret" }, "provisioning");
    const notNormal = await normalCall(provisioning, { token: "s3cret" });

    // Assert
    expect(elsewhere).toBeUndefined();
    expect(normal.records.at(-1)).toMatchObject({ outcome: "dropped", reason: "unknown collective provisioning" });
    expect(notNormal).toBeUndefined();
    expect(provisioning.records.at(-1)).toMatchObject({ outcome: "dropped", reason: "node is not in normal mode" });
  });
});
