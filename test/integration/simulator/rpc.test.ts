import { generateKeyPairSync } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RpcProtocolError, RpcStatusError, RpcTimeoutError } from "../../../lib/errors";
import { DEFAULT_CERT_DENY_LIST, validateCsr } from "../../../lib/crypto/csr";
import { encodeHex } from "../../../lib/crypto/encoding";
import { encryptLegacyPem } from "../../../lib/crypto/legacy-pem";
import { generateX25519KeyPair, x25519SharedSecret } from "../../../lib/crypto/ecdh";
import { uuidHex } from "../../../lib/crypto/ids";
import { verifyNonceSignature } from "../../../lib/crypto/nonce";
import { verifyProvisioningJwt } from "../../../lib/crypto/jwt";
import { type Fleet, type NodeFaults, startFleet } from "../../../dev/simulator";
import { rpcClient } from "../../support/simulator";
import { brokerForSuite } from "../../support/suite";

const TOKEN = "s3cret";
const CALLER = "provisioner.example.net.choria=provisioner.mcollective";
const RPC_TIMEOUT_MS = 4_000;

const broker = brokerForSuite();

describe.each([1, 2] as const)("every action round-trips over protocol v%i", (version) => {
  let fleet: Fleet;
  const [provisioned, upgraded, stopped] = ["a", "b", "c"].map((name) => `${name}-v${version}.example.net`) as [string, string, string];

  beforeAll(async () => {
    fleet = await startFleet({
      natsUrl: broker.nats.url,
      identities: [provisioned, upgraded, stopped],
      protocolVersion: version,
      token: TOKEN,
      upgradable: true,
      restartDelayMs: 50,
      shutdownDelayMs: 50,
      facts: { site: "lab" },
    });
  });
  afterAll(async () => {
    await fleet?.stop();
  });

  it("provisions a node: jwt, gen25519, inventory, gencsr, configure, restart", async () => {
    const rpc = rpcClient(broker.nc, version);
    const call = (agent: string, action: string, data: Record<string, unknown>) =>
      rpc.call({ identity: provisioned, agent, action, data, timeoutMs: RPC_TIMEOUT_MS });
    const nonce = uuidHex();

    const jwt = await call("choria_provision", "jwt", { token: TOKEN });
    const claims = await verifyProvisioningJwt(jwt.data.jwt as string, { kind: "ed25519", publicKey: fleet.signer.publicKey });
    const ed25519 = await call("choria_provision", "gen25519", { nonce, token: TOKEN });
    const inventory = await call("rpcutil", "inventory", {});
    const csr = await call("choria_provision", "gencsr", { cn: provisioned, token: TOKEN });
    const provisioner = generateX25519KeyPair();
    const secret = x25519SharedSecret(provisioner.privateKey, Buffer.from(jwt.data.ecdh_public as string, "hex"));
    const key = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
    const configure = await call("choria_provision", "configure", {
      action_policies: {},
      ca: "CA PEM",
      certificate: "CERT PEM",
      config: JSON.stringify({ "plugin.choria.server.provision": "false", identity: provisioned }),
      ecdh_public: encodeHex(provisioner.publicKey),
      key: encryptLegacyPem(key.export({ format: "pem", type: "pkcs1" }).toString(), secret),
      opa_policies: {},
      server_jwt: "",
      ssldir: csr.data.ssldir,
      token: TOKEN,
    });
    const restart = await call("choria_provision", "restart", { splay: 1, token: TOKEN });
    const node = fleet.node(provisioned);
    await fleet.waitFor(() => node.restarts === 1);
    const afterRestart = rpc.call({ identity: provisioned, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 300 });

    expect(claims).toMatchObject({ cht: TOKEN, purpose: "choria_provisioning", ...(version === 2 ? { v2: true } : {}) });
    expect(() => verifyNonceSignature(ed25519.data.public_key as string, nonce, ed25519.data.signature as string)).not.toThrow();
    expect(inventory.data).toMatchObject({ version: "0.30.0", upgradable: true, facts: { site: "lab" }, collectives: ["provisioning"] });
    expect(() => validateCsr(csr.data.csr as string, provisioned, DEFAULT_CERT_DENY_LIST)).not.toThrow();
    expect(configure.data).toEqual({ message: "Wrote 3 lines to /etc/choria/server.conf" });
    expect(restart.data).toEqual({ message: "Restarting Choria Server after 2s" });
    expect(Buffer.from(node.privateKeyDer ?? []).equals(key.export({ format: "der", type: "pkcs1" }))).toBe(true);
    expect(node.inProvisioningMode).toBe(false);
    await expect(afterRestart).rejects.toBeInstanceOf(RpcTimeoutError);
    expect(fleet.lifecycleEvents.filter((entry) => entry.event.identity === provisioned).map((entry) => entry.subject)).toEqual([
      "choria.lifecycle.event.startup.provision_mode_server",
      "choria.lifecycle.event.provisioned.provision_mode_server",
      "choria.lifecycle.event.shutdown.provision_mode_server",
    ]);
    expect(
      fleet.record.filter((entry) => entry.identity === provisioned && entry.outcome !== "dropped").map((entry) => [entry.action, entry.caller, entry.outcome]),
    ).toEqual(["jwt", "gen25519", "inventory", "gencsr", "configure", "restart"].map((action) => [action, CALLER, 0]));
  });

  it("upgrades a node with release_update, which comes back as the new version", async () => {
    const rpc = rpcClient(broker.nc, version);
    const node = fleet.node(upgraded);

    const reply = await rpc.call({
      identity: upgraded,
      agent: "choria_provision",
      action: "release_update",
      data: { repository: "https://repo.example.net", token: TOKEN, version: "0.31.0" },
      timeoutMs: RPC_TIMEOUT_MS,
    });
    await fleet.waitFor(() => node.startups === 2);
    const inventory = await rpc.call({ identity: upgraded, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: RPC_TIMEOUT_MS });

    expect(reply.data).toEqual({ message: "Restarting Choria Server after 2s" });
    expect(inventory.data.version).toBe("0.31.0");
    expect(fleet.lifecycleEvents.filter((entry) => entry.event.identity === upgraded).map((entry) => entry.event.type)).toEqual([
      "startup",
      "upgraded",
      "shutdown",
      "startup",
    ]);
  });

  it("stops a node with shutdown", async () => {
    const rpc = rpcClient(broker.nc, version);

    const reply = await rpc.call({ identity: stopped, agent: "choria_provision", action: "shutdown", data: { token: TOKEN }, timeoutMs: RPC_TIMEOUT_MS });
    await fleet.waitFor(() => !fleet.node(stopped).isRunning);

    expect(reply.data).toEqual({ message: "Shutting Choria Server down after 50ms" });
  });
});

describe("injected faults give the named client errors", () => {
  const faults: Record<string, NodeFaults> = {
    "silent.example.net": { silent: true },
    "slow.example.net": { delay: { ms: 3_000, on: ["inventory"] } },
    "sluggish.example.net": { delay: { ms: 100 } },
    "status.example.net": { status: { inventory: { statuscode: 5, statusmsg: "injected failure" } } },
    "transport-sender.example.net": { wrongSender: { transport: "impostor.example.net" } },
    "envelope-sender.example.net": { wrongSender: { envelope: "impostor.example.net" } },
    "foreign-id.example.net": { foreignRequestId: true },
    "bad-hash.example.net": { badHash: true },
    "bad-transport.example.net": { malformed: { layer: "transport" } },
    "bad-secure.example.net": { malformed: { layer: "secure" } },
    "bad-reply.example.net": { malformed: { layer: "reply" } },
    "bad-mcorpc.example.net": { malformed: { layer: "mcorpc" } },
    "oversized.example.net": { oversized: { bytes: 70_000 } },
    "duplicate.example.net": { duplicate: true },
    "crash.example.net": { crash: { after: "jwt", restartAfterMs: 100 } },
    "expired.example.net": { provisioningJwt: "expired" },
    "foreign.example.net": { provisioningJwt: "foreign" },
    "hs256.example.net": { provisioningJwt: "hs256" },
  };
  let fleet: Fleet;

  beforeAll(async () => {
    fleet = await startFleet({ natsUrl: broker.nats.url, identities: Object.keys(faults), faults, token: TOKEN });
  });
  afterAll(async () => {
    await fleet?.stop();
  });

  const inventory = (identity: string, timeoutMs = 500) =>
    rpcClient(broker.nc, 1, { maxReplyBytes: 64 * 1024 }).call({ identity, agent: "rpcutil", action: "inventory", data: {}, timeoutMs });

  it.each([
    ["silent.example.net", RpcTimeoutError],
    ["transport-sender.example.net", RpcProtocolError],
    ["envelope-sender.example.net", RpcProtocolError],
    ["foreign-id.example.net", RpcProtocolError],
    ["bad-hash.example.net", RpcProtocolError],
    ["bad-transport.example.net", RpcProtocolError],
    ["bad-secure.example.net", RpcProtocolError],
    ["bad-reply.example.net", RpcProtocolError],
    ["bad-mcorpc.example.net", RpcProtocolError],
    ["oversized.example.net", RpcProtocolError],
  ] as const)("%s gives %O", async (identity, expected) => {
    await expect(inventory(identity)).rejects.toBeInstanceOf(expected);
  });

  it("an injected status gives RpcStatusError with the code and message", async () => {
    const failure = await inventory("status.example.net").catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(RpcStatusError);
    expect(failure).toMatchObject({ statuscode: 5, statusmsg: "injected failure" });
  });

  it("a handler slower than the agent timeout sends nothing; a slow one inside it answers", async () => {
    const slow = await inventory("slow.example.net", 2_500).catch((error: unknown) => error);
    const sluggish = await inventory("sluggish.example.net", 2_000);

    expect(slow).toBeInstanceOf(RpcTimeoutError);
    expect(fleet.record.find((entry) => entry.identity === "slow.example.net")?.reason).toBe("agent timeout: handler took longer than 2000 ms");
    expect(sluggish.statuscode).toBe(0);
  });

  it("a duplicated reply still decides the call with its first copy", async () => {
    const reply = await inventory("duplicate.example.net");

    expect(reply.sender).toBe("duplicate.example.net");
  });

  it("a node crashing after jwt goes silent, then comes back in provisioning mode", async () => {
    const rpc = rpcClient(broker.nc, 1);
    const node = fleet.node("crash.example.net");

    const jwt = await rpc.call({ identity: "crash.example.net", agent: "choria_provision", action: "jwt", data: { token: TOKEN }, timeoutMs: 2_000 });
    const silent = await inventory("crash.example.net", 50).catch((error: unknown) => error);
    await fleet.waitFor(() => node.startups === 2);
    const back = await inventory("crash.example.net", 2_000);

    expect(jwt.statuscode).toBe(0);
    expect(silent).toBeInstanceOf(RpcTimeoutError);
    expect(back.statuscode).toBe(0);
  });

  it.each(["expired.example.net", "foreign.example.net", "hs256.example.net"])("%s hands out a provisioning JWT that fails verification", async (identity) => {
    const reply = await rpcClient(broker.nc, 1).call({ identity, agent: "choria_provision", action: "jwt", data: { token: TOKEN }, timeoutMs: 2_000 });

    await expect(verifyProvisioningJwt(reply.data.jwt as string, { kind: "ed25519", publicKey: fleet.signer.publicKey })).rejects.toThrow(
      /could not parse provisioner token/,
    );
  });

  it("faults can be changed at runtime", async () => {
    const node = fleet.node("sluggish.example.net");
    node.setFaults({ status: { inventory: { statuscode: 1, statusmsg: "now failing" } } });

    const failure = await inventory("sluggish.example.net").catch((error: unknown) => error);

    expect(failure).toMatchObject({ statuscode: 1, statusmsg: "now failing" });
  });
});
