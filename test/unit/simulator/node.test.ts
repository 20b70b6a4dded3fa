import { createPublicKey } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { decodeHex, encodeHex } from "../../../lib/crypto/encoding";
import { encryptLegacyPem } from "../../../lib/crypto/legacy-pem";
import { generateX25519KeyPair, x25519SharedSecret } from "../../../lib/crypto/ecdh";
import { parseCsr, verifyCsrSignature } from "../../support/choria-node/csr";
import { decryptLegacyPem } from "../../support/choria-node/legacy-pem";
import { signJwt } from "../../../lib/crypto/jwt";
import { uuidHex } from "../../../lib/crypto/ids";
import { verifyNonceSignature } from "../../../lib/crypto/nonce";
import { LOCK_WINDOW_MS } from "../../../dev/simulator";
import { harness, PROVISIONER, testRsaKey } from "./support";

const TOKEN = "s3cret";
const OTHER_CALLER = { senderId: "other.example.net", callerId: "choria=other" };
const configured = JSON.stringify({ "plugin.choria.server.provision": "false", identity: "node1.example.net" });

function rsaPem(): string {
  return testRsaKey().export({ format: "pem", type: "pkcs1" }).toString();
}

/**
 * The key sealed for `wrong` in a way that opening it with `secret` breaks the padding, the case
 * Go reports as a wrong password. About one random IV in 256 pads validly under the wrong key (Go,
 * too, then fails later, at parsing); those seals are skipped, so the case is the same every run.
 */
function sealedForWrongSecret(wrong: Uint8Array, secret: Uint8Array): string {
  for (;;) {
    const sealed = encryptLegacyPem(rsaPem(), wrong);
    try {
      decryptLegacyPem(sealed, secret);
    } catch (error) {
      if (error instanceof Error && error.message === "x509: decryption password incorrect") return sealed;
    }
  }
}

describe("token rule", () => {
  it("refuses a wrong token on every choria_provision action", async () => {
    const { call } = harness();

    const replies = await Promise.all(
      ["jwt", "gen25519", "gencsr", "configure", "restart", "shutdown"].map((action) => call("choria_provision", action, { token: "wrong" })),
    );

    for (const reply of replies) expect(reply).toMatchObject({ statuscode: 1, statusmsg: "Incorrect provision token supplied" });
  });

  // go-choria builddefaults SetBuildBasedOnJWT refuses a provisioning.jwt without `cht` ("no auth
  // token") and leaves the build defaults alone, so the server never enters provisioning mode.
  it("never enters provisioning mode when its provisioning JWT has no token", async () => {
    const { call, node, events, listening } = harness({ token: "" });

    const reply = await call("choria_provision", "jwt", { token: "anything" });

    expect(reply).toBeUndefined();
    expect(node.inProvisioningMode).toBe(false);
    expect(node.provisioningJwtRefused).toBe("no auth token");
    expect(events).toEqual([]);
    expect(listening).toEqual([false]);
  });
});

describe("the config file as go-choria reads it", () => {
  const restartAfterConfiguring = async (settings: Record<string, string>) => {
    const { call, node, clock } = harness();
    await call("choria_provision", "configure", { token: TOKEN, config: JSON.stringify(settings) });
    const reply = await call("choria_provision", "restart", { token: TOKEN, splay: 1 });
    await clock.advance(2000);
    return { reply, node };
  };

  // confkey strToBool: trimmed, any case, 1/yes/true/y/t are true; anything else (its error is
  // ignored) is false. restart re-reads the file; ProvisionMode then takes the set value.
  it("reads plugin.choria.server.provision with Go's boolean rules", async () => {
    for (const value of ["1", "yes", "TRUE", "Y", "t"]) {
      const { reply } = await restartAfterConfiguring({ "plugin.choria.server.provision": value });

      expect(reply?.statusmsg, value).toBe("Configuration /etc/choria/server.conf enables provisioning, restart cannot continue");
    }
    for (const value of ["on", "0", "no", "False", "enabled"]) {
      const { reply, node } = await restartAfterConfiguring({ "plugin.choria.server.provision": value });

      expect(reply?.statuscode, value).toBe(0);
      expect(node.inProvisioningMode, value).toBe(false);
    }
  });

  // provision configure_action writeConfig: `key=value` lines, then config.NewConfig on the file.
  it("knows the configuration only as the written file reads back", async () => {
    const { reply, node } = await restartAfterConfiguring({
      loglevel: "info\nplugin.choria.server.provision=yes",
      "plugin.choria.srv_domain": "",
      " identity ": "node1.example.net",
    });

    expect(node.configuredConfig).toEqual({ loglevel: "info", "plugin.choria.server.provision": "yes", identity: "node1.example.net" });
    expect(reply?.statusmsg).toBe("Configuration /etc/choria/server.conf enables provisioning, restart cannot continue");
  });

  it("refuses a configuration the server could not load and keeps the old file", async () => {
    const { call, node } = harness();

    const reply = await call("choria_provision", "configure", {
      token: TOKEN,
      config: JSON.stringify({ "plugin.security.client_anon_tls": "true", "plugin.choria.server.provision": "false" }),
    });

    expect(reply?.statusmsg).toBe(
      "Could not write config: generated configuration could not be parsed: anonymous TLS can only be enabled when a remote signer is configured",
    );
    expect(node.configuredConfig).toBeUndefined();
    expect(node.provisioned).toBe(0);
  });

  // server run shouldProvisionTokenAndSeed: with the choria security provider a missing,
  // mismatched or expired server.jwt sends the server back into provisioning mode.
  it("comes back into provisioning mode when a v2 config has no valid server JWT for its seed", async () => {
    const v2 = {
      "plugin.security.provider": "choria",
      "plugin.security.choria.token_file": "/etc/choria/server.jwt",
      "plugin.security.choria.seed_file": "/etc/choria/server.seed",
      "plugin.choria.server.provision": "false",
    };
    const serverJwt = async (publicKey: unknown, exp: number) =>
      signJwt({ identity: "node1.example.net", purpose: "choria_server", public_key: publicKey, exp }, ed25519SigningKey(generateEd25519Seed()));
    const outcome = async (jwt: (publicKey: unknown, now: number) => Promise<string | undefined>) => {
      const { call, node, clock } = harness();
      const generated = await call("choria_provision", "gen25519", { token: TOKEN, nonce: uuidHex() });
      const token = await jwt(generated?.data.public_key, Math.trunc(clock.now() / 1000));
      await call("choria_provision", "configure", { token: TOKEN, config: JSON.stringify(v2), ...(token ? { server_jwt: token } : {}) });
      await call("choria_provision", "restart", { token: TOKEN, splay: 1 });
      await clock.advance(2000);
      return { inProvisioningMode: node.inProvisioningMode, seed: node.files.serverSeedHex };
    };

    const valid = await outcome((publicKey, now) => serverJwt(publicKey, now + 3600));
    const missing = await outcome(async () => undefined);
    const foreign = await outcome((_publicKey, now) => serverJwt(encodeHex(new Uint8Array(32)), now + 3600));
    const expired = await outcome((publicKey, now) => serverJwt(publicKey, now - 1));

    expect(valid.inProvisioningMode).toBe(false);
    expect(valid.seed).toBeDefined();
    for (const broken of [missing, foreign, expired]) expect(broken).toEqual({ inProvisioningMode: true, seed: undefined });
  });

  // server run: in provisioning mode the server starts from the defaults (provisionConfig), so
  // its identity is the hostname whatever identity the written config sets.
  it("comes back into provisioning mode under its own identity, not the configured one", async () => {
    const { call, node, clock, events } = harness();
    await call("choria_provision", "configure", { token: TOKEN, config: JSON.stringify({ identity: "other.example.net" }) });

    await call("choria_provision", "restart", { token: TOKEN, splay: 1 });
    await clock.advance(2000);

    expect(node.inProvisioningMode).toBe(true);
    expect(node.identity).toBe("node1.example.net");
    expect(events.at(-1)).toMatchObject({ type: "startup", identity: "node1.example.net" });
  });
});

describe("provisioning lock", () => {
  it("is keyed senderid.callerid, extended by its holder and free again after two minutes", async () => {
    const { call, clock, node } = harness();

    const first = await call("choria_provision", "jwt", { token: TOKEN });
    await clock.advance(LOCK_WINDOW_MS - 1000);
    const extended = await call("choria_provision", "gen25519", { token: TOKEN, nonce: uuidHex() });
    await clock.advance(LOCK_WINDOW_MS - 1000);
    const refused = await call("choria_provision", "jwt", { token: TOKEN }, OTHER_CALLER);
    const holderWhileLocked = node.lockHolder;
    await clock.advance(1000);
    const granted = await call("choria_provision", "jwt", { token: TOKEN }, OTHER_CALLER);

    expect(first?.statuscode).toBe(0);
    expect(extended?.statuscode).toBe(0);
    expect(refused).toMatchObject({ statuscode: 1, statusmsg: "Could not obtain provisioning lock" });
    expect(holderWhileLocked).toBe(`${PROVISIONER.senderId}.${PROVISIONER.callerId}`);
    expect(granted?.statuscode).toBe(0);
    expect(node.lockHolder).toBe(`${OTHER_CALLER.senderId}.${OTHER_CALLER.callerId}`);
  });

  it("is taken before the token check, and restart is not locked", async () => {
    const { call } = harness();

    await call("choria_provision", "jwt", { token: "wrong" });
    const locked = await call("choria_provision", "jwt", { token: TOKEN }, OTHER_CALLER);
    const restart = await call("choria_provision", "restart", { token: TOKEN, splay: 1 }, OTHER_CALLER);

    expect(locked?.statusmsg).toBe("Could not obtain provisioning lock");
    expect(restart?.statuscode).toBe(0);
  });
});

describe("jwt, gen25519 and gencsr", () => {
  it("jwt returns the provisioning JWT and a fresh X25519 key each call", async () => {
    const { call } = harness();

    const first = await call("choria_provision", "jwt", { token: TOKEN });
    const second = await call("choria_provision", "jwt", { token: TOKEN });

    expect(first?.data.jwt).toBe("header.claims.signature");
    expect(first?.data.ecdh_public).toMatch(/^[0-9a-f]{64}$/);
    expect(second?.data.ecdh_public).not.toBe(first?.data.ecdh_public);
  });

  it("jwt names a missing JWT configuration or file", async () => {
    const none = harness({ jwt: undefined });
    const missing = harness({ faults: { provisioningJwt: "missing-file" } });

    const noneReply = await none.call("choria_provision", "jwt", { token: TOKEN });
    const missingReply = await missing.call("choria_provision", "jwt", { token: TOKEN });

    expect(noneReply?.statusmsg).toBe("No Provisioning JWT file has been configured");
    expect(missingReply?.statusmsg).toBe("Provisioning JWT file does not exist");
  });

  it("gen25519 signs the nonce, or something else under the bad-signature fault", async () => {
    const good = harness();
    const bad = harness({ faults: { badNonceSignature: true } });
    const nonce = uuidHex();

    const goodReply = await good.call("choria_provision", "gen25519", { token: TOKEN, nonce });
    const badReply = await bad.call("choria_provision", "gen25519", { token: TOKEN, nonce });

    expect(goodReply?.data.directory).toBe("/etc/choria");
    expect(() => verifyNonceSignature(goodReply?.data.public_key as string, nonce, goodReply?.data.signature as string)).not.toThrow();
    expect(() => verifyNonceSignature(badReply?.data.public_key as string, nonce, badReply?.data.signature as string)).toThrow(
      "invalid nonce signature",
    );
    expect(good.node.files.serverSeedHex).toMatch(/^[0-9a-f]{64}$/);
  });

  it("gencsr returns a signed CSR for the requested CN with a PKCS#1 key under a PUBLIC KEY label", async () => {
    const { call, node } = harness();

    const reply = await call("choria_provision", "gencsr", { token: TOKEN, cn: "node1.example.net" });

    const csr = reply?.data.csr as string;
    expect(parseCsr(csr)).toEqual({ commonName: "node1.example.net", dnsNames: [] });
    expect(verifyCsrSignature(csr)).toBe(true);
    expect(reply?.data.public_key).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    const der = Buffer.from((reply?.data.public_key as string).replace(/-----[^-]+-----|\s/g, ""), "base64");
    expect(createPublicKey({ key: der, format: "der", type: "pkcs1" }).asymmetricKeyType).toBe("rsa");
    expect(reply?.data.ssldir).toBe("/etc/choria/ssl");
    expect(node.files.csrPem).toBe(csr);
  });

  it("gencsr uses the CN and SANs of the csr fault", async () => {
    const { call } = harness({ faults: { csr: { commonName: "evil.example.net", dnsNames: ["x.privileged.choria"] } } });

    const reply = await call("choria_provision", "gencsr", { token: TOKEN, cn: "node1.example.net" });

    expect(parseCsr(reply?.data.csr as string)).toEqual({ commonName: "evil.example.net", dnsNames: ["x.privileged.choria"] });
  });
});

describe("configure", () => {
  it("checks in the Go order: token, config, key without ECDH, config decoding", async () => {
    const { call } = harness();

    const token = await call("choria_provision", "configure", { token: "wrong", config: "" });
    const empty = await call("choria_provision", "configure", { token: TOKEN, config: "" });
    const noEcdh = await call("choria_provision", "configure", { token: TOKEN, config: "not json", key: "k" });
    const undecodable = await call("choria_provision", "configure", { token: TOKEN, config: "not json" });
    const mistyped = await call("choria_provision", "configure", { token: 7, config: configured });

    expect(token?.statusmsg).toBe("Incorrect provision token supplied");
    expect(empty?.statusmsg).toBe("Did not receive any configuration to write, cannot write a empty configuration file");
    expect(noEcdh?.statusmsg).toBe("EDCH Public Key not supplied while providing a private key");
    expect(undecodable?.statusmsg).toMatch(/^Could not decode configuration data: /);
    expect(mistyped).toMatchObject({
      statuscode: 4,
      statusmsg:
        "Could not parse request data for choria_provision#configure: json: cannot unmarshal number into Go struct field ConfigureRequest.token of type string",
    });
  });

  it("decrypts the private key with the secret of the latest jwt call and stores it", async () => {
    const { call, node, events } = harness();
    await call("choria_provision", "jwt", { token: TOKEN });
    const latest = await call("choria_provision", "jwt", { token: TOKEN });
    const provisioner = generateX25519KeyPair();
    const secret = x25519SharedSecret(provisioner.privateKey, Buffer.from(latest?.data.ecdh_public as string, "hex"));

    const reply = await call("choria_provision", "configure", {
      token: TOKEN,
      config: configured,
      certificate: "CERT",
      ca: "CA",
      ssldir: "/etc/choria/ssl",
      key: encryptLegacyPem(rsaPem(), secret),
      ecdh_public: encodeHex(provisioner.publicKey),
      server_jwt: "server.jwt.token",
      action_policies: { "default.policy": "policy default deny" },
      opa_policies: {},
    });

    expect(reply).toMatchObject({ statuscode: 0, data: { message: "Wrote 3 lines to /etc/choria/server.conf" } });
    expect(Buffer.from(node.privateKeyDer ?? []).equals(testRsaKey().export({ format: "der", type: "pkcs1" }))).toBe(true);
    expect(node.serverJwt).toBe("server.jwt.token");
    expect(node.configuredConfig).toEqual(JSON.parse(configured));
    expect(node.files.actionPolicies).toEqual({ "default.policy": "policy default deny" });
    expect(node.provisioned).toBe(1);
    expect(events.map((event) => event.type)).toEqual(["startup", "provisioned"]);
  });

  it("names each private key failure as TLS Setup Failed", async () => {
    const { call } = harness();
    const provisioner = generateX25519KeyPair();
    const tls = { token: TOKEN, config: configured, certificate: "C", ca: "A", ssldir: "/s", ecdh_public: encodeHex(provisioner.publicKey) };

    const beforeJwt = await call("choria_provision", "configure", { ...tls, key: encryptLegacyPem(rsaPem(), new Uint8Array(32)) });
    const jwt = await call("choria_provision", "jwt", { token: TOKEN });
    const secret = x25519SharedSecret(provisioner.privateKey, decodeHex(String(jwt?.data.ecdh_public)));
    const wrongSecret = await call("choria_provision", "configure", { ...tls, key: sealedForWrongSecret(new Uint8Array(32).fill(7), secret) });
    const plain = await call("choria_provision", "configure", { ...tls, key: rsaPem() });
    const notPem = await call("choria_provision", "configure", { ...tls, key: "garbage" });
    const badHex = await call("choria_provision", "configure", { ...tls, key: "k", ecdh_public: "zz" });

    expect(beforeJwt?.statusmsg).toBe("TLS Setup Failed: could not decrypt private key: private key not set");
    expect(wrongSecret?.statusmsg).toBe("TLS Setup Failed: could not decrypt private key: x509: decryption password incorrect");
    expect(plain?.statusmsg).toBe("TLS Setup Failed: could not decrypt private key: key is not encrypted");
    expect(notPem?.statusmsg).toBe("TLS Setup Failed: could not decrypt private key: bad key received");
    expect(badHex?.statusmsg).toBe("TLS Setup Failed: could not decrypt private key: encoding/hex: invalid byte: U+007A 'z'");
  });

  it("refuses policy names without their extension after writing the config", async () => {
    const { call, node } = harness();

    const policy = await call("choria_provision", "configure", { token: TOKEN, config: configured, action_policies: { x: "p" } });
    const rego = await call("choria_provision", "configure", { token: TOKEN, config: configured, opa_policies: { "y.txt": "p" } });

    expect(policy?.statusmsg).toBe('Could not save Action Policies: expected "x" to have .policy extension');
    expect(rego?.statusmsg).toBe('Could not save Open Policy Agent Policies: expected "y.txt" to have .rego extension');
    expect(node.configuredConfig).toEqual(JSON.parse(configured));
    expect(node.provisioned).toBe(0);
  });
});

describe("restart", () => {
  it("refuses while the config still enables provisioning", async () => {
    const { call } = harness();
    await call("choria_provision", "configure", { token: TOKEN, config: JSON.stringify({ "plugin.choria.server.provision": "true" }) });

    const reply = await call("choria_provision", "restart", { token: TOKEN, splay: 1 });

    expect(reply?.statusmsg).toBe("Configuration /etc/choria/server.conf enables provisioning, restart cannot continue");
  });

  it("replies, announces shutdown and leaves provisioning mode after the delay", async () => {
    const { call, node, clock, events, listening } = harness();
    await call("choria_provision", "configure", { token: TOKEN, config: configured });

    const reply = await call("choria_provision", "restart", { token: TOKEN, splay: 1 });
    const stillListening = node.listening;
    await clock.advance(2000);

    expect(reply?.data).toEqual({ message: "Restarting Choria Server after 2s" });
    expect(stillListening).toBe(true);
    expect(events.map((event) => event.type)).toEqual(["startup", "provisioned", "shutdown"]);
    expect(node.restarts).toBe(1);
    expect(node.inProvisioningMode).toBe(false);
    expect(listening).toEqual([true, false]);
  });

  it("comes back in provisioning mode and announces startup when the config leaves it to the JWT", async () => {
    const { call, node, clock, events } = harness();
    await call("choria_provision", "configure", { token: TOKEN, config: JSON.stringify({ loglevel: "debug" }) });

    await call("choria_provision", "restart", { token: TOKEN, splay: 1 });
    await clock.advance(2000);

    expect(node.inProvisioningMode).toBe(true);
    expect(events.map((event) => event.type)).toEqual(["startup", "provisioned", "shutdown", "startup"]);
  });
});

describe("release_update and shutdown", () => {
  it("release_update needs upgradable and reports updater failures", async () => {
    const fixed = harness();
    const failing = harness({ upgradable: true, faults: { updateFailure: { message: "checksum mismatch" } } });
    const broken = harness({ upgradable: true, faults: { updateFailure: { message: "disk full", rollbackFailed: true } } });
    const data = { token: TOKEN, repository: "https://repo.example.net", version: "0.31.0" };

    const refused = await fixed.call("choria_provision", "release_update", data);
    const rolledBack = await failing.call("choria_provision", "release_update", data);
    const brokenState = await broken.call("choria_provision", "release_update", data);

    expect(refused?.statusmsg).toBe("Version updates is not enabled in the configuration");
    expect(rolledBack?.statusmsg).toBe("Update to version 0.31.0 failed, release rolled back: checksum mismatch");
    expect(brokenState?.statusmsg).toBe("Update to version 0.31.0 failed, rollback also failed, server in broken state: disk full");
  });

  it("release_update announces upgraded, restarts and comes back as the new version", async () => {
    const { call, node, clock, events } = harness({ upgradable: true });

    const reply = await call("choria_provision", "release_update", { token: TOKEN, repository: "https://r", version: "0.31.0" });
    await clock.advance(2000);
    const inventory = await call("rpcutil", "inventory");

    expect(reply?.data).toEqual({ message: "Restarting Choria Server after 2s" });
    expect(events.map((event) => [event.type, event.version, event.newVersion])).toEqual([
      ["startup", "0.30.0", undefined],
      ["upgraded", "0.30.0", "0.31.0"],
      ["shutdown", undefined, undefined],
      ["startup", "0.31.0", undefined],
    ]);
    expect(node.inProvisioningMode).toBe(true);
    expect(inventory?.data).toMatchObject({ version: "0.31.0", upgradable: true });
  });

  it("shutdown replies and stops the node after its delay", async () => {
    const { call, node, clock } = harness();

    const reply = await call("choria_provision", "shutdown", { token: TOKEN });
    await clock.advance(1000);

    expect(reply?.data).toEqual({ message: "Shutting Choria Server down after 1s" });
    expect(node.isRunning).toBe(false);
    expect(node.listening).toBe(false);
  });
});

describe("receive pipeline", () => {
  it("answers discovery pings with pong and drops other discovery payloads", async () => {
    const { node, request, records } = harness();

    const pong = await node.handle(request("discovery", new TextEncoder().encode("ping"), { filter: { fact: [], cf_class: [], agent: ["choria_provision"], identity: [], compound: [] } }));
    const other = await node.handle(request("discovery", new TextEncoder().encode("pang")));

    expect(new TextDecoder().decode(pong?.payload)).toBe("pong");
    expect(other).toBeUndefined();
    expect(records.at(-1)).toMatchObject({ outcome: "dropped", reason: "discovery payload is not ping" });
  });

  it("drops requests for other identities, collectives, agents, protocol versions and outside the TTL", async () => {
    const { call, clock, records } = harness();
    const now = Math.trunc(clock.now() / 1000);

    const replies = [
      await call("rpcutil", "inventory", {}, { filter: { fact: [], cf_class: [], agent: [], identity: ["node2.example.net"], compound: [] } }),
      await call("rpcutil", "inventory", {}, { collective: "mcollective" }),
      await call("rpcutil", "inventory", {}, { timeSeconds: now - 60 }),
      await call("puppet", "status", {}, { filter: { fact: [], cf_class: [], agent: [], identity: [], compound: [] } }),
      await call("rpcutil", "inventory", {}, { version: 2 }),
      await call("rpcutil", "inventory", {}, { filter: { fact: [], cf_class: [], agent: ["puppet"], identity: [], compound: [] } }),
    ];

    expect(replies.every((reply) => reply === undefined)).toBe(true);
    expect(records.map((record) => record.reason)).toEqual([
      "filter does not match",
      "unknown collective mcollective",
      "request is outside its ttl",
      "unknown agent puppet",
      "protocol v2 request on a protocol v1 server",
      "filter does not match",
    ]);
    expect(records[0]).toMatchObject({ identity: "node1.example.net", agent: "rpcutil", action: "inventory", outcome: "dropped" });
  });

  it("answers unknown actions and undecodable bodies with their mcorpc status", async () => {
    const { call, node, request } = harness();

    const unknown = await call("choria_provision", "explode", { token: TOKEN });
    const garbage = await node.handle(request("rpcutil", new TextEncoder().encode("{nope")));

    expect(unknown).toMatchObject({ statuscode: 2, statusmsg: "Unknown action explode for agent choria_provision" });
    expect(JSON.parse(new TextDecoder().decode(garbage?.payload))).toMatchObject({ statuscode: 4 });
  });

  it("reports the inventory of a provisioning-mode server, with the odd-version fault", async () => {
    const normal = harness();
    const odd = harness({ faults: { inventoryVersion: "not.a.version~" } });

    const inventory = await normal.call("rpcutil", "inventory");
    const oddInventory = await odd.call("rpcutil", "inventory");

    expect(inventory?.data).toEqual({
      agents: ["choria_provision", "choria_util", "discovery", "rpcutil"],
      classes: [],
      collectives: ["provisioning"],
      data_plugins: [],
      facts: { role: "web" },
      machines: [],
      main_collective: "provisioning",
      version: "0.30.0",
      upgradable: false,
    });
    expect(oddInventory?.data.version).toBe("not.a.version~");
  });

  it("records every answered request with its caller and status", async () => {
    const { call, records } = harness();

    await call("choria_provision", "jwt", { token: "wrong" });

    expect(records).toEqual([
      {
        timeMs: expect.any(Number),
        executedAtMs: expect.any(Number),
        identity: "node1.example.net",
        caller: `${PROVISIONER.senderId}.${PROVISIONER.callerId}`,
        agent: "choria_provision",
        action: "jwt",
        requestId: "0123456789abcdef0123456789abcdef",
        outcome: 1,
        statusmsg: "Incorrect provision token supplied",
      },
    ]);
  });
});

describe("faults", () => {
  it("drops a reply slower than the agent timeout", async () => {
    const { node, clock, request, records } = harness({ faults: { delay: { ms: 5000, on: ["inventory"] } } });

    const pending = node.handle(request("rpcutil", new TextEncoder().encode(JSON.stringify({ agent: "rpcutil", action: "inventory", data: {} }))));
    await clock.advance(2000);

    expect(await pending).toBeUndefined();
    expect(records.at(-1)).toMatchObject({ outcome: "dropped", reason: "agent timeout: handler took longer than 2000 ms" });
  });

  it("replaces the status, silences, and crashes after an action", async () => {
    const { call, node, clock, events } = harness({
      faults: { status: { jwt: { statuscode: 5, statusmsg: "injected" } }, silent: ["rpcutil#ping"], crash: { after: "gen25519", restartAfterMs: 500 } },
    });

    const status = await call("choria_provision", "jwt", { token: TOKEN });
    const silent = await call("rpcutil", "ping");
    const lastWords = await call("choria_provision", "gen25519", { token: TOKEN, nonce: "n" });
    const afterCrash = await call("rpcutil", "inventory");
    await clock.advance(500);
    const reborn = await call("rpcutil", "inventory");

    expect(status).toMatchObject({ statuscode: 5, statusmsg: "injected" });
    expect(silent).toBeUndefined();
    expect(lastWords?.statuscode).toBe(0);
    expect(afterCrash).toBeUndefined();
    expect(reborn?.statuscode).toBe(0);
    expect(node.restarts).toBe(1);
    expect(node.files.serverSeedHex).toBeUndefined();
    expect(events.map((event) => event.type)).toEqual(["startup", "startup"]);
  });
});

describe("reprovision", () => {
  it("is refused by a server already in provisioning mode", async () => {
    const { call } = harness();

    const reply = await call("choria_provision", "reprovision", { token: TOKEN });

    expect(reply?.statusmsg).toBe("Server is already in provisioning mode, cannot enable provisioning mode again");
  });
});
