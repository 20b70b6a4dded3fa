/**
 * Every feature combination end to end: what the simulated node ended with after the real engine
 * provisioned it over NATS under a lease held in DynamoDB Local.
 */
import { generateKeyPair, type KeyObject } from "node:crypto";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { mintChainIssuerToken, verifyChainedServerJwt } from "../../support/choria-node/server-jwt";
import { verifyJwtSignature } from "../../support/choria-node/jwt-signature";
import { UpgradeError } from "../../../lib/engine/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import { LOCK_KEY, MJS_HELPER, EngineHarness, newSigningKey, nodePublicKeyHex, recordsOf, requestsTo, restarted } from "./support";
import { presentedJwt, serverJwtExpiry } from "../../support/server-jwt-expiry";

let harness: EngineHarness;
/** The private key the site's helper hands out with a signed certificate. */
let helperKey: KeyObject;

beforeAll(async () => {
  harness = await EngineHarness.start(inject("dynamoEndpoint"));
  helperKey = (await promisify(generateKeyPair)("rsa", { modulusLength: 2048 })).privateKey;
});
afterEach(() => harness.stopFleets());
afterAll(() => harness?.stop());

const exampleHelper = (env: Record<string, string> = {}) => new ExecHelperRunner({ command: MJS_HELPER, env });

describe("feature combinations", () => {
  it("with no features configures from inventory and the helper alone, then restarts the node out of provisioning mode", async () => {
    const identity = "plain.example.net";
    const fleet = await harness.fleet({ identities: [identity] });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper() });

    const outcome = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(outcome).toEqual({ kind: "provisioned", identity });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "configure:0", "restart:0"]);
    const node = fleet.node(identity);
    expect(node.configuredConfig).toEqual({
      identity,
      loglevel: "info",
      collectives: "mcollective",
      "plugin.choria.server.provision": "false",
      "plugin.choria.middleware_hosts": "nats://broker.example.net:4222",
    });
    expect(node.serverJwt).toBeUndefined();
    expect(node.privateKeyDer).toBeUndefined();
    expect(node.inProvisioningMode).toBe(false);
  });

  it("with jwt verifies the node's provisioning JWT before going on", async () => {
    const identity = "jwt.example.net";
    const fleet = await harness.fleet({ identities: [identity] });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true } });

    const outcome = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(outcome).toEqual({ kind: "provisioned", identity, provisioningJwt: presentedJwt(fleet) });
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "inventory:0", "configure:0", "restart:0"]);
    expect(fleet.node(identity).configuredConfig?.identity).toBe(identity);
    expect(fleet.node(identity).inProvisioningMode).toBe(false);
  });

  // go-choria's jwt action returns provisioning.jwt byte for byte; the Go provisioner verifies it
  // with golang-jwt, whose base64 decoding skips CR and LF.
  it.each([["\n"], ["\r\n"]])("with jwt provisions a node whose provisioning.jwt ends in %j", async (suffix) => {
    const identity = `jwt-file-${suffix.length}.example.net`;
    const fleet = await harness.fleet({ identities: [identity], jwtFileSuffix: suffix });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true } });

    const outcome = await engine.provision(work(identity));

    expect(fleet.provisioningJwt.endsWith(suffix)).toBe(true);
    expect(outcome).toEqual({ kind: "provisioned", identity, provisioningJwt: presentedJwt(fleet) });
  });

  it("with jwt and ed25519 hands the node a server JWT for its own key, signed with jwt_signing_key", async () => {
    const identity = "ed.example.net";
    const fleet = await harness.fleet({ identities: [identity] });
    const signingKey = newSigningKey();
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true, ed25519: true }, settings: { signingKey } });

    const outcome = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(outcome).toEqual({ kind: "provisioned", identity, credentials: serverJwtExpiry(fleet, identity), provisioningJwt: presentedJwt(fleet) });
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "gen25519:0", "inventory:0", "configure:0", "restart:0"]);
    const node = fleet.node(identity);
    const nodePublicKey = nodePublicKeyHex(node);
    const claims = verifyJwtSignature(node.serverJwt ?? "", signingKey.publicKey);
    expect(claims).toMatchObject({ identity, public_key: nodePublicKey, collectives: ["mcollective"], purpose: "choria_server", ou: "choria" });
    expect(node.configuredConfig).toMatchObject({
      "plugin.security.provider": "choria",
      "plugin.security.choria.token_file": "/etc/choria/server.jwt",
      "plugin.security.choria.seed_file": "/etc/choria/server.seed",
    });
    expect(node.inProvisioningMode).toBe(false);
  });

  it("with jwt_signing_token issues a chained server JWT that verifies with the org issuer key", async () => {
    const identity = "chained.example.net";
    const fleet = await harness.fleet({ identities: [identity] });
    const signingKey = newSigningKey();
    const orgIssuer = newSigningKey();
    const signingToken = await mintChainIssuerToken({
      orgIssuer,
      chainPublicKeyHex: signingKey.publicKeyHex,
      exp: Math.floor(Date.now() / 1000) + 30 * 24 * 3600,
    });
    const { engine, work } = await harness.engine({
      fleet,
      helper: exampleHelper(),
      features: { jwt: true, ed25519: true },
      settings: { signingKey, signingToken },
    });

    const outcome = await engine.provision(work(identity));

    expect(outcome).toEqual({ kind: "provisioned", identity, credentials: serverJwtExpiry(fleet, identity), provisioningJwt: presentedJwt(fleet) });
    const node = fleet.node(identity);
    const nodePublicKey = nodePublicKeyHex(node);
    const claims = verifyChainedServerJwt(node.serverJwt ?? "", orgIssuer.publicKeyHex);
    expect(claims).toMatchObject({ identity, public_key: nodePublicKey, collectives: ["mcollective"], purpose: "choria_server" });
    expect(claims.iss).toMatch(/^C-/);
    expect(() => verifyChainedServerJwt(node.serverJwt ?? "", newSigningKey().publicKeyHex)).toThrow(/not signed by org issuer/);
  });

  it("with jwt and pki validates the CSR, uses its ssldir and transports the helper's private key to the node", async () => {
    const identity = "pki.example.net";
    const fleet = await harness.fleet({ identities: [identity] });
    const keyPem = helperKey.export({ format: "pem", type: "pkcs1" }).toString();
    const response = {
      defer: false,
      shutdown: false,
      msg: "signed",
      configuration: { identity, "plugin.choria.server.provision": "false" },
      certificate: "-----BEGIN CERTIFICATE-----\nsigned-for-pki\n-----END CERTIFICATE-----\n",
      ca: "-----BEGIN CERTIFICATE-----\nissuing-ca\n-----END CERTIFICATE-----\n",
      key: keyPem,
      ssldir: "/helper/chose/this/ssl",
    };
    const helper = new ExecHelperRunner({ command: await harness.respondingHelper("pki", response) });
    const { engine, work } = await harness.engine({ fleet, helper, features: { jwt: true, pki: true } });

    const outcome = await engine.provision(work(identity));
    expect(outcome).toEqual({ kind: "provisioned", identity, provisioningJwt: presentedJwt(fleet) });
    await restarted(fleet, identity);

    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "inventory:0", "gencsr:0", "configure:0", "restart:0"]);
    const node = fleet.node(identity);
    expect(node.files.ssldir).toBe("/etc/choria/ssl");
    expect(node.files.certificate).toBe(response.certificate);
    expect(node.files.ca).toBe(response.ca);
    expect(Buffer.from(node.privateKeyDer ?? new Uint8Array())).toEqual(helperKey.export({ format: "der", type: "pkcs1" }));
    expect(node.files.csrPem).toBeUndefined();
    expect(node.inProvisioningMode).toBe(false);
  });
  it("with every feature over protocol v2 configures keys, certificate and server JWT in one run", async () => {
    const identity = "everything-v2.example.net";
    const fleet = await harness.fleet({ identities: [identity], protocolVersion: 2, upgradable: true, version: "0.31.0" });
    const response = {
      configuration: { identity, collectives: "production,backup", "plugin.choria.server.provision": "false" },
      certificate: "-----BEGIN CERTIFICATE-----\nsigned-for-everything\n-----END CERTIFICATE-----\n",
      ca: "-----BEGIN CERTIFICATE-----\nissuing-ca\n-----END CERTIFICATE-----\n",
      key: helperKey.export({ format: "pem", type: "pkcs1" }).toString(),
      upgrade: "0.31.0",
    };
    const helper = new ExecHelperRunner({ command: await harness.respondingHelper("everything", response) });
    const signingKey = newSigningKey();
    const { engine, work } = await harness.engine({
      fleet,
      helper,
      features: { jwt: true, ed25519: true, pki: true, upgrades: true },
      settings: { signingKey },
      rpc: harness.rpc(harness.nc, undefined, 2),
    });

    const outcome = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(outcome).toEqual({ kind: "provisioned", identity, credentials: serverJwtExpiry(fleet, identity), provisioningJwt: presentedJwt(fleet) });
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "gen25519:0", "inventory:0", "gencsr:0", "configure:0", "restart:0"]);
    const node = fleet.node(identity);
    expect(verifyJwtSignature(node.serverJwt ?? "", signingKey.publicKey)).toMatchObject({
      identity,
      public_key: nodePublicKeyHex(node),
      collectives: ["production", "backup"],
    });
    expect(Buffer.from(node.privateKeyDer ?? new Uint8Array())).toEqual(helperKey.export({ format: "der", type: "pkcs1" }));
    expect(node.files.certificate).toBe(response.certificate);
    expect(node.inProvisioningMode).toBe(false);
  });
});

describe("upgrades", () => {
  it("sends release_update instead of configuring, and provisions the upgraded node on its next run", async () => {
    const identity = "upgrade.example.net";
    const fleet = await harness.fleet({ identities: [identity], upgradable: true, version: "0.30.0" });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper({ PROVISION_HELPER_UPGRADE: "0.31.0" }), features: { upgrades: true } });

    const first = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(first).toEqual({ kind: "upgrading", identity, fromVersion: "0.30.0", toVersion: "0.31.0" });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "release_update:0"]);
    const node = fleet.node(identity);
    expect(node.version).toBe("0.31.0");
    expect(node.configuredConfig).toBeUndefined();
    expect(node.inProvisioningMode).toBe(true);

    const second = await engine.provision(work(identity));
    await restarted(fleet, identity, 2);

    expect(second).toEqual({ kind: "provisioned", identity });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "release_update:0", "inventory:0", "configure:0", "restart:0"]);
    expect(node.configuredConfig?.identity).toBe(identity);
    expect(node.inProvisioningMode).toBe(false);
  });

  it("does not ask for an update when the node already runs the helper's version", async () => {
    const identity = "current.example.net";
    const fleet = await harness.fleet({ identities: [identity], upgradable: true, version: "0.31.0" });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper({ PROVISION_HELPER_UPGRADE: "0.31.0" }), features: { upgrades: true } });

    const outcome = await engine.provision(work(identity));

    expect(outcome).toEqual({ kind: "provisioned", identity });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "configure:0", "restart:0"]);
    expect(fleet.node(identity).version).toBe("0.31.0");
  });

  it("with upgrades_optional carries on to configure after release_update failed on every try", async () => {
    const identity = "optional.example.net";
    const fleet = await harness.fleet({
      identities: [identity],
      upgradable: true,
      faults: { [identity]: { updateFailure: { message: "checksum mismatch" } } },
    });
    const { engine, work } = await harness.engine({
      fleet,
      helper: exampleHelper({ PROVISION_HELPER_UPGRADE: "0.31.0" }),
      features: { upgrades: true },
      settings: { upgradesOptional: true },
    });

    const outcome = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(outcome).toEqual({ kind: "provisioned", identity });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "release_update:1", "release_update:1", "release_update:1", "configure:0", "restart:0"]);
    expect(recordsOf(fleet, identity)[1]?.statusmsg).toBe("Update to version 0.31.0 failed, release rolled back: checksum mismatch");
    expect(fleet.node(identity).version).toBe("0.30.0");
    expect(fleet.node(identity).inProvisioningMode).toBe(false);
  });

  it("without upgrades_optional fails at the upgrade step and never configures", async () => {
    const identity = "mandatory.example.net";
    const fleet = await harness.fleet({
      identities: [identity],
      upgradable: true,
      faults: { [identity]: { updateFailure: { message: "disk full", rollbackFailed: true } } },
    });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper({ PROVISION_HELPER_UPGRADE: "0.31.0" }), features: { upgrades: true } });

    const outcome = await engine.provision(work(identity));

    expect(outcome).toMatchObject({ kind: "failed", identity, step: "upgrade", retryable: false });
    expect(outcome.kind === "failed" && outcome.error).toBeInstanceOf(UpgradeError);
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "release_update:1", "release_update:1", "release_update:1"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
    expect(fleet.node(identity).inProvisioningMode).toBe(true);
  });
});

describe("the node's provisioning lock", () => {
  it("is held under the provisioner's senderid.callerid while it provisions", async () => {
    const identity = "locked.example.net";
    const fleet = await harness.fleet({ identities: [identity] });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true } });

    await engine.provision(work(identity));

    expect(new Set(recordsOf(fleet, identity).map((entry) => entry.caller))).toEqual(new Set([LOCK_KEY]));
  });
});
