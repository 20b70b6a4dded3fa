import { beforeAll, describe, expect, it } from "vitest";
import { certificateIdentity } from "../../../lib/crypto/certificate";
import { decodeJwt } from "../../../lib/crypto/jwt";
import { verifyJwtSignature } from "../../support/choria-node/jwt-signature";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { encodeHex } from "../../../lib/crypto/encoding";
import { mintChainIssuerToken, mintProvisioningJwt, verifyChainedServerJwt } from "../../support/choria-node/server-jwt";
import { encodeGoJson } from "../../../lib/engine/go-json";
import { HELPER_TIMEOUT_MS, RPC_PLAN } from "../../../lib/engine/plan";
import { IdentityCollisionError, KeyTransportError, OutOfTimeError, RpcRetriesExhaustedError, UpgradeError } from "../../../lib/engine/errors";
import { keepsHostKnown, type ProvisionOutcome } from "../../../lib/engine/outcome";
import { ProvisionEngine } from "../../../lib/engine/provision";
import type { EngineSettings } from "../../../lib/engine/settings";
import { RpcNotSentError, ConfigError, CsrError, DeferredError, HelperError, JwtError, LeaseLostError, NonceSignatureError, PausedError, RpcTransportError } from "../../../lib/errors";
import { EXTRA_METRIC, METRIC } from "../../../lib/ports/metric-names";
import type { HelperResponse } from "../../../lib/ports/helper";
import { selfSignedCertificate } from "../../support/certificate";
import type { IssuedCredentials } from "../../../lib/ports/issuance-ledger";
import type { CredentialsExpiry } from "../../../lib/ports/credentials";
import { createHash, X509Certificate } from "node:crypto";
import { FakeGate, FakeHelper, FakeRpc, RecordingLogger, RecordingMetrics, statusError, timeout, VirtualClock } from "../../support/fakes";
import { seededRandom } from "../../support/random";
import {
  FakeNode,
  helperResponse,
  IDENTITY,
  makeTestKeys,
  settings,
  START_WALL_MS,
  type TestKeys,
  TOKEN,
  work,
} from "./support";

type EngineFeatures = EngineSettings["features"];

const NONE: EngineFeatures = { jwt: false, ed25519: false, pki: false, upgrades: false };
const JWT: EngineFeatures = { ...NONE, jwt: true };
const JWT_ED25519: EngineFeatures = { ...NONE, jwt: true, ed25519: true };
const JWT_PKI: EngineFeatures = { ...NONE, jwt: true, pki: true };

const INVENTORY = "rpcutil#inventory";
const JWT_RPC = "choria_provision#jwt";
const GEN25519 = "choria_provision#gen25519";
const GENCSR = "choria_provision#gencsr";
const CONFIGURE = "choria_provision#configure";
const RESTART = "choria_provision#restart";
const SHUTDOWN = "choria_provision#shutdown";
const RELEASE_UPDATE = "choria_provision#release_update";

let keys: TestKeys;

beforeAll(() => {
  keys = makeTestKeys();
});

interface Harness {
  engine: ProvisionEngine;
  rpc: FakeRpc;
  node: FakeNode;
  gate: FakeGate;
  helper: FakeHelper;
  metrics: RecordingMetrics;
  logger: RecordingLogger;
  clock: VirtualClock;
  settings: EngineSettings;
}

async function harness(options: { features?: EngineFeatures; settings?: Partial<EngineSettings>; helper?: HelperResponse | Error } = {}): Promise<Harness> {
  const clock = new VirtualClock(START_WALL_MS, 1_000);
  const node = await FakeNode.create(IDENTITY, keys, clock.now());
  const rpc = node.install(new FakeRpc());
  const gate = new FakeGate(clock);
  const helper = new FakeHelper(options.helper ?? helperResponse());
  const metrics = new RecordingMetrics();
  const logger = new RecordingLogger();
  const engineSettings = settings({
    features: options.features ?? NONE,
    jwtVerifier: keys.verifier,
    signingKey: keys.signingKey,
    ...options.settings,
  });
  const engine = new ProvisionEngine({ settings: engineSettings, rpc, gate, helper, metrics, clock, logger, random: seededRandom(7) });
  return { engine, rpc, node, gate, helper, metrics, logger, clock, settings: engineSettings };
}

function configureData(h: Harness): Record<string, unknown> {
  const calls = h.rpc.callsTo(CONFIGURE);
  expect(calls).toHaveLength(1);
  return calls[0]!.data;
}

function expectFailed(outcome: ProvisionOutcome, step: string, errorType: abstract new (...args: never[]) => Error) {
  expect(outcome.kind).toBe("failed");
  if (outcome.kind !== "failed") throw new Error("unreachable");
  expect(outcome.step).toBe(step);
  expect(outcome.error).toBeInstanceOf(errorType);
  return outcome;
}

describe("ProvisionEngine sequence without features", () => {
  it("runs inventory, helper, configure and restart and counts a provisioned host", async () => {
    // Arrange
    const h = await harness();

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toEqual({ kind: "provisioned", identity: IDENTITY });
    expect(keepsHostKnown(outcome)).toBe(true);
    expect(h.rpc.sequence()).toEqual([INVENTORY, CONFIGURE, RESTART]);
    expect(h.metrics.total(METRIC.provisioned)).toBe(1);
    expect(h.metrics.total(METRIC.provisionErrors)).toBe(0);
    expect(h.metrics.of(METRIC.busyWorkers).map((record) => record.value)).toEqual([1, 0]);
    expect(h.metrics.of(METRIC.helperTime)).toHaveLength(1);
  });

  it("hands the helper the host JSON with the Go-encoded inventory and no csr, key or jwt", async () => {
    // Arrange
    const h = await harness();
    delete h.node.inventory.upgradable;

    // Act
    await h.engine.provision(work());

    // Assert
    expect(h.helper.requests).toEqual([
      { identity: IDENTITY, csr: null, ed25519_pubkey: null, inventory: encodeGoJson({ ...h.node.inventory, upgradable: false }), jwt: null },
    ]);
    expect(h.helper.requests[0]!.inventory).toContain('"facts":{"10":"ten","9":"nine","zone":"a\\u003cb\\u003e\\u0026c"}');
  });

  it("sends configure with exactly the ten keys the Go provisioner sends", async () => {
    // Arrange
    const configuration = { "plugin.choria.server.provision": "false", "plugin.choria.srv_domain": "example.net" };
    const h = await harness({
      helper: helperResponse({ configuration, ca: "CA PEM", certificate: "CERT PEM", ssldir: "/opt/ssl", opa_policies: { "x.rego": "package x" } }),
    });

    // Act
    await h.engine.provision(work());

    // Assert
    expect(configureData(h)).toEqual({
      action_policies: {},
      ca: "CA PEM",
      certificate: "CERT PEM",
      config: encodeGoJson(configuration),
      ecdh_public: "",
      key: "",
      opa_policies: { "x.rego": "package x" },
      server_jwt: "",
      ssldir: "/opt/ssl",
      token: TOKEN,
    });
    expect(Object.keys(configureData(h))).toEqual([
      "action_policies", "ca", "certificate", "config", "ecdh_public", "key", "opa_policies", "server_jwt", "ssldir", "token",
    ]);
  });

  it("restarts with splay 1 and the token, and sends inventory with no data", async () => {
    // Arrange
    const h = await harness();

    // Act
    await h.engine.provision(work());

    // Assert
    expect(h.rpc.callsTo(RESTART)[0]).toMatchObject({ identity: IDENTITY, agent: "choria_provision", action: "restart", data: { splay: 1, token: TOKEN }, timeoutMs: 22_000 });
    expect(h.rpc.callsTo(INVENTORY)[0]).toMatchObject({ identity: IDENTITY, agent: "rpcutil", action: "inventory", data: {}, timeoutMs: 4_000 });
  });

  // The Go provisioner checks for an empty configuration inside configure's rpcWrapper callback:
  // each of the 5 tries fails before sending, with backoff between them, and rpc_errors counts it.
  it("refuses an empty configuration on every configure try without sending it", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ configuration: {} }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const failed = expectFailed(outcome, "configure", RpcRetriesExhaustedError).error;
    expect(failed.message).toMatch(/gave up after 5 tries: empty configuration$/);
    expect(failed.cause).toBeInstanceOf(HelperError);
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
    expect(h.clock.sleeps).toHaveLength(RPC_PLAN.configure.tries - 1);
    expect(h.metrics.total(METRIC.rpcErrors, CONFIGURE)).toBe(1);
    expect(h.metrics.total(METRIC.provisionErrors)).toBe(1);
  });

  it("stops retrying an empty configuration when the gate closes", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ configuration: {} }) });
    h.gate.closeWhen = () => h.clock.sleeps.length >= 2;

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("paused");
    expect(h.clock.sleeps).toHaveLength(2);
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
  });

  it("retries each RPC the planned number of times and no more", async () => {
    // Arrange
    const h = await harness();
    h.rpc.respond(CONFIGURE, () => timeout(IDENTITY, CONFIGURE));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const failed = expectFailed(outcome, "configure", RpcRetriesExhaustedError);
    expect(failed.retryable).toBe(false);
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(RPC_PLAN.configure.tries);
    expect(h.rpc.callsTo(RESTART)).toHaveLength(0);
    expect(h.clock.sleeps).toHaveLength(RPC_PLAN.configure.tries - 1);
    expect(h.metrics.total(METRIC.rpcErrors, CONFIGURE)).toBe(1);
    expect(h.metrics.of(METRIC.rpcTime).filter((record) => record.labels?.rpc === CONFIGURE)).toHaveLength(5);
  });

  it.each([
    ["was never sent", () => new RpcNotSentError(IDENTITY, CONFIGURE, "not sent: the connection did not flush within 2000 ms before the send-by instant")],
    ["hit a closed connection", () => new RpcTransportError(IDENTITY, CONFIGURE, "could not send the request over NATS", { cause: new Error("CONNECTION_CLOSED") })],
    ["was never confirmed by the broker", () => new RpcTransportError(IDENTITY, CONFIGURE, "no reply within 10000 ms, and the broker never confirmed the request")],
  ])("hands work back as retryable, not as the host's failure, when every request of a step %s", async (_, transportFailure) => {
    // Arrange
    const h = await harness();
    h.rpc.respond(CONFIGURE, transportFailure);

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "configure", RpcRetriesExhaustedError).retryable).toBe(true);
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(RPC_PLAN.configure.tries);
  });

  it("counts a step as the host's failure when its last request reached the node, even if earlier ones were not sent", async () => {
    // Arrange
    const h = await harness();
    let tries = 0;
    h.rpc.respond(CONFIGURE, () => (++tries < RPC_PLAN.configure.tries ? new RpcNotSentError(IDENTITY, CONFIGURE, "not sent") : timeout(IDENTITY, CONFIGURE)));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "configure", RpcRetriesExhaustedError).retryable).toBe(false);
  });

  it("gives up on inventory after 5 tries and restart after 3", async () => {
    // Arrange
    const inventoryDown = await harness();
    inventoryDown.rpc.respond(INVENTORY, () => timeout(IDENTITY, INVENTORY));
    const restartDown = await harness();
    restartDown.rpc.respond(RESTART, () => statusError(IDENTITY, RESTART));

    // Act
    const inventoryOutcome = await inventoryDown.engine.provision(work());
    const restartOutcome = await restartDown.engine.provision(work());

    // Assert
    expectFailed(inventoryOutcome, "inventory", RpcRetriesExhaustedError);
    expect(inventoryDown.rpc.calls).toHaveLength(5);
    expect(inventoryDown.helper.requests).toHaveLength(0);
    expectFailed(restartOutcome, "restart", RpcRetriesExhaustedError);
    expect(restartDown.rpc.callsTo(RESTART)).toHaveLength(3);
  });

  it("takes a configured node whose restart got no reply as provisioned, so its new credentials are recorded", async () => {
    // Arrange: the node took its configuration, then no restart attempt was answered (the first
    // reply lost, the node gone from the provisioning broker for the others).
    const h = await harness({ helper: helperResponse({ certificate: selfSignedCertificate(IDENTITY, 30) }) });
    h.rpc.respond(RESTART, () => timeout(IDENTITY, RESTART));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(outcome.kind === "provisioned" && outcome.credentials?.kind).toBe("certificate");
    expect(h.rpc.callsTo(RESTART)).toHaveLength(3);
    expect(h.logger.records.some((record) => record.level === "warn" && record.message.includes("taking it as restarted"))).toBe(true);
  });
});

describe("ProvisionEngine with the jwt feature", () => {
  it("fetches the JWT with the token and gives the helper the verified claims", async () => {
    // Arrange
    const h = await harness({ features: JWT });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.sequence()).toEqual([JWT_RPC, INVENTORY, CONFIGURE, RESTART]);
    expect(h.rpc.callsTo(JWT_RPC)[0]!.data).toEqual({ token: TOKEN });
    expect(h.helper.requests[0]!.jwt).toMatchObject({ cht: TOKEN, chs: true, chpd: true, purpose: "choria_provisioning" });
  });

  it("stops when the JWT is not signed by the configured issuer", async () => {
    // Arrange
    const h = await harness({ features: JWT });
    const iat = Math.floor(START_WALL_MS / 1000);
    h.node.provisioningJwt = await mintProvisioningJwt(
      { cht: TOKEN, chs: true, chpd: true, purpose: "choria_provisioning", iat, exp: iat + 60 },
      ed25519SigningKey(generateEd25519Seed()),
    );

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const failed = expectFailed(outcome, "jwt", JwtError);
    expect(failed.error.message).toMatch(/^could not validate JWT from node1.example.net: /);
    // Not signed by our issuer: nothing it claims is recorded.
    expect(failed.provisioningJwt).toBeUndefined();
    expect(h.rpc.sequence()).toEqual([JWT_RPC]);
  });

  it("stops when the JWT has expired by the engine's clock, saying whose it was and when it expired", async () => {
    // Arrange
    const h = await harness({ features: JWT });
    const exp = Number(decodeJwt(h.node.provisioningJwt).claims.exp);
    h.clock.advance(2 * 3_600_000);

    // Act
    const outcome = await h.engine.provision(work({ admittedAt: h.clock.now() }));

    // Assert
    expect(expectFailed(outcome, "jwt", JwtError).provisioningJwt).toEqual({ issuer: "", expiresAt: exp * 1000 });
    expect(h.rpc.sequence()).toEqual([JWT_RPC]);
  });

  it("says whose provisioning JWT a node presented and when it expires, with the outcome of its provisioning or failure", async () => {
    // Arrange
    const iat = Math.floor(START_WALL_MS / 1000);
    const exp = iat + 10 * 24 * 3_600;
    const provisioned = await harness({ features: JWT });
    const failing = await harness({ features: JWT, helper: new HelperError("helper exited 1") });
    for (const h of [provisioned, failing]) {
      h.node.provisioningJwt = await mintProvisioningJwt({ cht: TOKEN, chs: true, chpd: true, purpose: "choria_provisioning", iss: "image-2025", iat, exp }, keys.issuer);
    }

    // Act
    const outcomes = [await provisioned.engine.provision(work()), await failing.engine.provision(work())];

    // Assert
    expect(outcomes.map((outcome) => [outcome.kind, "provisioningJwt" in outcome ? outcome.provisioningJwt : undefined])).toEqual([
      ["provisioned", { issuer: "image-2025", expiresAt: exp * 1000 }],
      ["failed", { issuer: "image-2025", expiresAt: exp * 1000 }],
    ]);
  });

  it("stops when the node sends no JWT", async () => {
    // Arrange
    const h = await harness({ features: JWT });
    h.node.provisioningJwt = "";

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "jwt", JwtError).error.message).toContain("no JWT received");
  });

  it("names jwt_verify_cert when no verifier was loaded", async () => {
    // Arrange
    const h = await harness({ features: JWT, settings: { jwtVerifier: undefined } });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "jwt", ConfigError).error).toMatchObject({ key: "jwt_verify_cert" });
  });

  it("gives up on jwt after 3 tries", async () => {
    // Arrange
    const h = await harness({ features: JWT });
    h.rpc.respond(JWT_RPC, () => timeout(IDENTITY, JWT_RPC));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expectFailed(outcome, "jwt", RpcRetriesExhaustedError);
    expect(h.rpc.calls).toHaveLength(3);
  });

  it("encrypts the helper's key for the node with X25519 and sends the provisioner's public key", async () => {
    // Arrange
    const h = await harness({ features: JWT, helper: helperResponse({ key: keys.rsaKeyPem }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    const data = configureData(h);
    expect(data.ecdh_public).toMatch(/^[0-9a-f]{64}$/);
    expect(String(data.key)).toMatch(/^-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,[0-9a-f]{32}\n/);
    const decrypted = h.node.decryptKey(String(data.key), String(data.ecdh_public));
    expect(encodeHex(decrypted)).toBe(encodeHex(keys.rsaKey.export({ format: "der", type: "pkcs1" })));
  });
});

describe("ProvisionEngine with jwt and ed25519", () => {
  it("fetches an ed25519 key with a fresh nonce and signs a server JWT for it", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519 });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.sequence()).toEqual([JWT_RPC, GEN25519, INVENTORY, CONFIGURE, RESTART]);
    const gen = h.rpc.callsTo(GEN25519)[0]!;
    expect(Object.keys(gen.data)).toEqual(["nonce", "token"]);
    expect(gen.data.nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(h.helper.requests[0]!.ed25519_pubkey).toEqual({
      public_key: h.node.ed25519PublicKeyHex(),
      directory: "/etc/choria",
      signature: expect.stringMatching(/^[0-9a-f]{128}$/),
    });
    const claims = verifyJwtSignature(String(configureData(h).server_jwt), keys.signingKey.publicKey);
    expect(claims).toMatchObject({
      identity: IDENTITY,
      collectives: ["mcollective"],
      ou: "choria",
      purpose: "choria_server",
      public_key: h.node.ed25519PublicKeyHex(),
      iss: "Choria Provisioner",
      iat: Math.floor(START_WALL_MS / 1000),
      exp: Math.floor(START_WALL_MS / 1000) + h.settings.serverJwtValidityMs / 1000,
    });
  });

  it("applies the helper's server claims and collectives to the server JWT", async () => {
    // Arrange
    const exp = Math.floor(START_WALL_MS / 1000) + 30 * 24 * 3600;
    const h = await harness({
      features: JWT_ED25519,
      helper: helperResponse({
        configuration: { "plugin.security.provider": "choria", collectives: "a,b" },
        server_claims: { ou: "acme", exp, pub_subjects: ["x.>"], permissions: { streams: true } },
      }),
    });

    // Act
    await h.engine.provision(work());

    // Assert
    const claims = decodeJwt(String(configureData(h).server_jwt)).claims;
    expect(claims).toMatchObject({ collectives: ["a", "b"], ou: "acme", pub_subjects: ["x.>"], permissions: { streams: true }, exp });
  });

  it("retries gen25519 with a new nonce after a bad signature", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519 });
    h.rpc.queue(GEN25519, { public_key: encodeHex(new Uint8Array(32).fill(1)), directory: "/etc/choria", signature: "00".repeat(64) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    const nonces = h.rpc.callsTo(GEN25519).map((call) => call.data.nonce);
    expect(nonces).toHaveLength(2);
    expect(nonces[0]).not.toBe(nonces[1]);
  });

  it("fails after 5 gen25519 tries when the nonce signature never verifies", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519 });
    h.rpc.respond(GEN25519, () => ({ public_key: h.node.ed25519PublicKeyHex(), directory: "/etc/choria", signature: "ab".repeat(64) }));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const failed = expectFailed(outcome, "gen25519", RpcRetriesExhaustedError);
    expect(failed.error.cause).toBeInstanceOf(NonceSignatureError);
    expect(failed.error.message).toContain("invalid nonce signature");
    expect(h.rpc.callsTo(GEN25519)).toHaveLength(5);
    expect(h.rpc.callsTo(INVENTORY)).toHaveLength(0);
  });

  it("requires a public key and a signature in the gen25519 reply", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519 });
    h.rpc.respond(GEN25519, () => ({ directory: "/etc/choria" }));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "gen25519", RpcRetriesExhaustedError).error.message).toContain("no public key received");
  });

  it("adds chain issuer data when a signing token is configured", async () => {
    // Arrange
    const org = ed25519SigningKey(generateEd25519Seed());
    const chainKey = keys.signingKey as Extract<typeof keys.signingKey, { alg: "EdDSA" }>;
    const signingToken = await mintChainIssuerToken({
      orgIssuer: org,
      chainPublicKeyHex: chainKey.publicKeyHex,
      now: new Date(START_WALL_MS),
      exp: Math.floor(START_WALL_MS / 1000) + 90 * 24 * 3600,
    });
    const h = await harness({ features: JWT_ED25519, settings: { signingToken } });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    const orgPublicKeyHex = (org as Extract<typeof org, { alg: "EdDSA" }>).publicKeyHex;
    const claims = verifyChainedServerJwt(String(configureData(h).server_jwt), orgPublicKeyHex, new Date(START_WALL_MS));
    expect(claims.iss).toMatch(/^C-/);
    expect(claims.exp).toBe(Math.floor(START_WALL_MS / 1000) + 90 * 24 * 3600);
  });

  it("names jwt_signing_key when no signing key was loaded", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519, settings: { signingKey: undefined } });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "server_jwt", ConfigError).error).toMatchObject({ key: "jwt_signing_key" });
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(0);
  });
});

describe("ProvisionEngine with jwt and pki", () => {
  it("asks for a CSR once with cn = identity and lets the CSR's ssldir win", async () => {
    // Arrange
    const h = await harness({ features: JWT_PKI, helper: helperResponse({ ssldir: "/helper/ssl" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.sequence()).toEqual([JWT_RPC, INVENTORY, GENCSR, CONFIGURE, RESTART]);
    expect(h.rpc.callsTo(GENCSR)[0]!.data).toEqual({ cn: IDENTITY, token: TOKEN });
    expect(h.helper.requests[0]!.csr).toMatchObject({ ssldir: "/etc/choria/ssl", csr: expect.stringContaining("BEGIN CERTIFICATE REQUEST") });
    expect(configureData(h).ssldir).toBe("/etc/choria/ssl");
  });

  it("keeps the helper's ssldir when the CSR reply has none", async () => {
    // Arrange
    const h = await harness({ features: JWT_PKI, helper: helperResponse({ ssldir: "/helper/ssl" }) });
    h.node.ssldir = "";

    // Act
    await h.engine.provision(work());

    // Assert
    expect(configureData(h).ssldir).toBe("/helper/ssl");
  });

  it("tries gencsr only once", async () => {
    // Arrange
    const h = await harness({ features: JWT_PKI });
    h.rpc.respond(GENCSR, () => timeout(IDENTITY, GENCSR));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expectFailed(outcome, "gencsr", RpcRetriesExhaustedError);
    expect(h.rpc.callsTo(GENCSR)).toHaveLength(1);
    expect(h.clock.sleeps).toEqual([]);
  });

  it("rejects a CSR whose name matches the deny list", async () => {
    // Arrange
    const h = await harness({ features: JWT_PKI });
    h.node.csrDnsNames = ["evil.privileged.choria"];

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "gencsr", CsrError).error.message).toBe("evil.privileged.choria matches denied certificate pattern");
    expect(h.helper.requests).toHaveLength(0);
  });

  it("rejects a CSR whose common name is not the identity", async () => {
    // Arrange
    const h = await harness({ features: JWT_PKI });
    h.node.csrCommonName = "other.example.net";

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "gencsr", CsrError).error.message).toBe("common name other.example.net does not match identity node1.example.net");
  });
});

describe("ProvisionEngine helper decisions", () => {
  it("defers with Go's message and sends nothing more", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ defer: true, msg: "not in CMDB yet" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("deferred");
    if (outcome.kind !== "deferred") throw new Error("unreachable");
    expect(outcome.error).toBeInstanceOf(DeferredError);
    expect(outcome.error.message).toBe("configuration defered: not in CMDB yet");
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
    expect(h.metrics.total(METRIC.provisionErrors)).toBe(1);
  });

  it("shuts the node down with the token and counts the request", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ shutdown: true, msg: "decommissioned" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toEqual({ kind: "shutdown", identity: IDENTITY, acknowledged: true });
    expect(h.rpc.sequence()).toEqual([INVENTORY, SHUTDOWN]);
    expect(h.rpc.callsTo(SHUTDOWN)[0]!.data).toEqual({ token: TOKEN });
    expect(h.metrics.total(METRIC.helperShutdownRequests)).toBe(1);
    expect(h.metrics.total(METRIC.provisioned)).toBe(1);
  });

  it("only logs an error status from shutdown and does not retry it", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ shutdown: true }) });
    h.rpc.respond(SHUTDOWN, () => statusError(IDENTITY, SHUTDOWN, "Cannot shutdown a server that is not in provisioning mode or with no token set"));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toEqual({ kind: "shutdown", identity: IDENTITY, acknowledged: false });
    expect(h.rpc.callsTo(SHUTDOWN)).toHaveLength(1);
    expect(h.metrics.total(METRIC.helperShutdownRequests)).toBe(0);
    expect(h.logger.records.some((record) => record.level === "warn" && record.message.startsWith("Could not shutdown node1.example.net"))).toBe(true);
  });

  it("retries shutdown up to 3 times when the node does not answer", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ shutdown: true }) });
    h.rpc.respond(SHUTDOWN, () => timeout(IDENTITY, SHUTDOWN));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expectFailed(outcome, "shutdown", RpcRetriesExhaustedError);
    expect(h.rpc.callsTo(SHUTDOWN)).toHaveLength(3);
  });

  it("counts a helper error and keeps a HelperError as it is", async () => {
    // Arrange
    const failure = new HelperError("cannot read helper output: zero bytes received");
    const h = await harness({ helper: failure });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "helper", HelperError).error).toBe(failure);
    expect(h.metrics.total(METRIC.helperErrors)).toBe(1);
    expect(h.metrics.of(METRIC.helperTime)).toHaveLength(1);
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
  });

  it("wraps any other helper failure in a HelperError", async () => {
    // Arrange
    const h = await harness({ helper: new Error("spawn ENOENT") });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "helper", HelperError).error.message).toBe("could not invoke configure helper: spawn ENOENT");
  });

  it("refuses a key when the node never started the Diffie-Hellman exchange", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ key: keys.rsaKeyPem }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "key", KeyTransportError).error.message).toBe(
      "private key received from helper but server did not start Diffie-Hellman exchange",
    );
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(0);
  });
});

describe("ProvisionEngine upgrades", () => {
  const UPGRADES: EngineFeatures = { ...NONE, upgrades: true };

  it("releases an update to a different version and ends without configuring", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, helper: helperResponse({ upgrade: "0.31.0" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toEqual({ kind: "upgrading", identity: IDENTITY, fromVersion: "0.30.0", toVersion: "0.31.0" });
    expect(keepsHostKnown(outcome)).toBe(false);
    expect(h.rpc.sequence()).toEqual([INVENTORY, RELEASE_UPDATE]);
    expect(h.rpc.callsTo(RELEASE_UPDATE)[0]!.data).toEqual({ repository: "https://repo.example.net/choria", token: TOKEN, version: "0.31.0" });
    expect(h.metrics.total(METRIC.provisioned)).toBe(1);
  });

  it("releases an update for a downgrade too", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, helper: helperResponse({ upgrade: "0.29.4" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("upgrading");
  });

  it("configures as usual when the node already runs the target version", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, helper: helperResponse({ upgrade: "0.30.0" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.sequence()).toEqual([INVENTORY, CONFIGURE, RESTART]);
  });

  it("ignores the helper's upgrade when the feature is off", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ upgrade: "0.31.0" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.callsTo(RELEASE_UPDATE)).toHaveLength(0);
  });

  it("fails when the node cannot be upgraded and upgrades are not optional", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, helper: helperResponse({ upgrade: "0.31.0" }) });
    h.node.inventory.upgradable = false;

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "upgrade", UpgradeError).error.message).toBe("does not support upgrades");
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
  });

  it("fails without a version in the inventory", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, helper: helperResponse({ upgrade: "0.31.0" }) });
    delete h.node.inventory.version;

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "upgrade", UpgradeError).error.message).toBe("did not receive a version in inventory");
  });

  it("fails without a repository unless upgrades are optional", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, settings: { upgradesRepository: "" }, helper: helperResponse({ upgrade: "0.31.0" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(expectFailed(outcome, "upgrade", UpgradeError).error.message).toContain("upgrades_repository");
    expect(h.rpc.callsTo(RELEASE_UPDATE)).toHaveLength(0);
  });

  // Go's handleHostUpgrade only refuses an empty upgrades_repository when upgrades are not optional;
  // otherwise release_update goes out with repository "".
  it("sends release_update with an empty repository when upgrades are optional", async () => {
    // Arrange
    const h = await harness({
      features: UPGRADES,
      settings: { upgradesRepository: "", upgradesOptional: true },
      helper: helperResponse({ upgrade: "0.31.0" }),
    });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("upgrading");
    expect(h.rpc.callsTo(RELEASE_UPDATE)[0]!.data).toEqual({ repository: "", token: TOKEN, version: "0.31.0" });
  });

  it("configures anyway when upgrades are optional and the node cannot be upgraded", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, settings: { upgradesOptional: true }, helper: helperResponse({ upgrade: "0.31.0" }) });
    h.node.inventory.upgradable = false;

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.sequence()).toEqual([INVENTORY, CONFIGURE, RESTART]);
  });

  it("tries release_update 3 times, then continues only when upgrades are optional", async () => {
    // Arrange
    const optional = await harness({ features: UPGRADES, settings: { upgradesOptional: true }, helper: helperResponse({ upgrade: "0.31.0" }) });
    const required = await harness({ features: UPGRADES, helper: helperResponse({ upgrade: "0.31.0" }) });
    for (const h of [optional, required]) {
      h.rpc.respond(RELEASE_UPDATE, () => statusError(IDENTITY, RELEASE_UPDATE, "Version updates is not enabled in the configuration"));
    }

    // Act
    const optionalOutcome = await optional.engine.provision(work());
    const requiredOutcome = await required.engine.provision(work());

    // Assert
    expect(optionalOutcome.kind).toBe("provisioned");
    expect(optional.rpc.sequence()).toEqual([INVENTORY, RELEASE_UPDATE, RELEASE_UPDATE, RELEASE_UPDATE, CONFIGURE, RESTART]);
    expect(expectFailed(requiredOutcome, "upgrade", UpgradeError).error.message).toMatch(/^update to 0.31.0 failed: /);
    expect(required.rpc.sequence()).toEqual([INVENTORY, RELEASE_UPDATE, RELEASE_UPDATE, RELEASE_UPDATE]);
  });

  it("stops at a closed gate during release_update even when upgrades are optional", async () => {
    // Arrange
    const h = await harness({ features: UPGRADES, settings: { upgradesOptional: true }, helper: helperResponse({ upgrade: "0.31.0" }) });
    h.rpc.respond(RELEASE_UPDATE, () => timeout(IDENTITY, RELEASE_UPDATE));
    h.gate.closeWhen = () => h.rpc.callsTo(RELEASE_UPDATE).length >= 1;

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("paused");
    expect(h.rpc.sequence()).toEqual([INVENTORY, RELEASE_UPDATE]);
  });
});

describe("ProvisionEngine pause gate", () => {
  it("sends nothing when the gate is closed from the start", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519 });
    h.gate.close();

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toMatchObject({ kind: "paused", step: "jwt" });
    expect(h.rpc.calls).toEqual([]);
    expect(h.helper.requests).toEqual([]);
    expect(h.gate.checks[0]).toEqual({ term: 7, attemptTimeoutMs: 22_000 });
  });

  it("stops mid-retries at the next attempt boundary and sends nothing after the gate closed", async () => {
    // Arrange
    const h = await harness();
    h.rpc.respond(CONFIGURE, () => timeout(IDENTITY, CONFIGURE));
    let callsWhenClosed = -1;
    h.gate.closeWhen = () => {
      const closed = h.rpc.callsTo(CONFIGURE).length >= 2;
      if (closed && callsWhenClosed < 0) callsWhenClosed = h.rpc.calls.length;
      return closed;
    };
    h.gate.failure = new LeaseLostError("term 7 is no longer current");

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toMatchObject({ kind: "paused", step: "configure" });
    expect(h.rpc.calls).toHaveLength(callsWhenClosed);
    expect(h.rpc.sequence()).toEqual([INVENTORY, CONFIGURE, CONFIGURE]);
  });

  it("refuses to run the helper when the gate closed after inventory", async () => {
    // Arrange
    const h = await harness();
    h.gate.closeWhen = () => h.rpc.calls.length >= 1;

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toMatchObject({ kind: "paused", step: "helper" });
    if (outcome.kind !== "paused") throw new Error("unreachable");
    expect(outcome.error).toBeInstanceOf(PausedError);
    expect(h.helper.requests).toEqual([]);
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
    expect(h.gate.checks.at(-1)).toEqual({ term: 7, attemptTimeoutMs: HELPER_TIMEOUT_MS });
    expect(h.metrics.total(METRIC.helperErrors)).toBe(0);
  });
});

describe("ProvisionEngine helper timeout", () => {
  it("asks the gate to cover the configured helper timeout, not Go's fixed 10 s", async () => {
    // Arrange
    const h = await harness({ settings: { helperTimeoutMs: 45_000 } });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.gate.checks).toContainEqual({ term: 7, attemptTimeoutMs: 45_000 });
    expect(h.gate.checks).not.toContainEqual({ term: 7, attemptTimeoutMs: HELPER_TIMEOUT_MS });
  });
});

describe("ProvisionEngine admission age and deadline", () => {
  it("skips work that waited longer than twice the interval without contacting the node", async () => {
    // Arrange
    const h = await harness();

    // Act
    const outcome = await h.engine.provision(work({ admittedAt: START_WALL_MS - 2 * 60_000 - 5_300 }));

    // Assert
    expect(outcome).toEqual({ kind: "skipped", identity: IDENTITY, reason: "skipping node that's been waiting 2m5.3s" });
    expect(h.rpc.calls).toEqual([]);
    expect(h.metrics.total(METRIC.provisionErrors)).toBe(1);
  });

  it("provisions work that waited exactly twice the interval", async () => {
    // Arrange
    const h = await harness();

    // Act
    const outcome = await h.engine.provision(work({ admittedAt: START_WALL_MS - 2 * 60_000 }));

    // Assert
    expect(outcome.kind).toBe("provisioned");
  });

  it("hands work back as retryable when the helper could not finish before the deadline", async () => {
    // Arrange
    const h = await harness();
    const end = h.clock.monotonic() + HELPER_TIMEOUT_MS - 1;
    h.rpc.beforeAnswer = () => h.clock.advance(1);

    // Act
    const outcome = await h.engine.provision(work(), { remainingMs: () => end - h.clock.monotonic() });

    // Assert
    const failed = expectFailed(outcome, "helper", OutOfTimeError);
    expect(failed.retryable).toBe(true);
    expect(h.helper.requests).toEqual([]);
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
  });

  it("hands work back as retryable when no configure attempt fits", async () => {
    // Arrange
    const h = await harness();
    const end = h.clock.monotonic() + RPC_PLAN.configure.timeoutMs - 1;

    // Act
    const outcome = await h.engine.provision(work(), { remainingMs: () => end - h.clock.monotonic() });

    // Assert
    expect(expectFailed(outcome, "configure", OutOfTimeError).retryable).toBe(true);
    expect(h.rpc.sequence()).toEqual([INVENTORY]);
  });
});

describe("ProvisionEngine observability", () => {
  it("keeps the token, keys and JWTs out of logs and tags lines with identity and term", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519, helper: helperResponse({ key: keys.rsaKeyPem }) });
    h.rpc.queue(CONFIGURE, timeout(IDENTITY, CONFIGURE));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    const logged = h.logger.text();
    expect(logged).not.toContain(TOKEN);
    expect(logged).not.toContain(h.node.provisioningJwt);
    expect(logged).not.toContain("PRIVATE KEY");
    expect(logged).not.toContain(String(h.rpc.callsTo(CONFIGURE).at(-1)!.data.server_jwt).split(".")[1]);
    expect(h.logger.records.filter((record) => record.level !== "debug").every((record) => record.attributes?.identity === IDENTITY && record.attributes?.term === 7)).toBe(true);
  });

  it("reports the busy gauge across concurrent provisions", async () => {
    // Arrange
    const h = await harness();

    // Act
    await Promise.all([h.engine.provision(work()), h.engine.provision(work({ identity: "node2.example.net" }))]);

    // Assert
    const values = h.metrics.of(METRIC.busyWorkers).map((record) => record.value);
    expect(values.slice(0, 2)).toEqual([1, 2]);
    expect(values.at(-1)).toBe(0);
    expect(Math.max(...values)).toBe(2);
  });
});

describe("ProvisionEngine reports busy worker time that adds up across invocations", () => {
  it("observes how long each provision kept its worker busy, in seconds, failed ones too", async () => {
    // Arrange: every RPC answer takes 2 s of the engine's clock.
    const h = await harness();
    h.rpc.beforeAnswer = () => h.clock.advance(2_000);
    const started = h.clock.monotonic();

    // Act
    await h.engine.provision(work());
    const firstEnded = h.clock.monotonic();
    h.helper.answer = new Error("the helper crashed");
    const failed = await h.engine.provision(work());

    // Assert
    expect(failed.kind).toBe("failed");
    const busy = h.metrics.of(EXTRA_METRIC.busyWorkerSeconds);
    expect(busy.map((record) => record.type)).toEqual(["timing", "timing"]);
    expect(busy[0]!.value).toBe((firstEnded - started) / 1000);
    expect(busy[0]!.value).toBeGreaterThanOrEqual(6);
    expect(busy[1]!.value).toBe((h.clock.monotonic() - firstEnded) / 1000);
    expect(busy[1]!.value).toBeGreaterThanOrEqual(2);
  });
});

describe("ProvisionEngine records when the credentials it handed out expire", () => {
  const DAY_MS = 24 * 3_600_000;

  it("reports the server JWT's exp when no certificate is given", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519, settings: { serverJwtValidityMs: 3 * DAY_MS } });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const exp = Number(decodeJwt(String(configureData(h).server_jwt)).claims.exp);
    const jti = String(decodeJwt(String(configureData(h).server_jwt)).claims.jti);
    const { provisioningJwt: _presented, ...recorded } = outcome as Extract<ProvisionOutcome, { kind: "provisioned" }>;
    expect(recorded).toEqual({ kind: "provisioned", identity: IDENTITY, credentials: { kind: "server_jwt", expiresAt: exp * 1000, issuedAt: START_WALL_MS, credentialId: jti } });
  });

  it("reports the certificate's notAfter when it expires before the server JWT", async () => {
    // Arrange
    const certificate = selfSignedCertificate(IDENTITY, 2);
    const h = await harness({ features: JWT_ED25519, settings: { serverJwtValidityMs: 10 * 365 * DAY_MS }, helper: helperResponse({ certificate }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toMatchObject({ kind: "provisioned", credentials: { kind: "certificate", expiresAt: certificateIdentity(certificate).notAfter } });
  });

  it("reports the server JWT when it expires before the certificate", async () => {
    // Arrange
    const h = await harness({
      features: JWT_ED25519,
      settings: { serverJwtValidityMs: DAY_MS },
      helper: helperResponse({ certificate: selfSignedCertificate(IDENTITY, 30) }),
    });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toMatchObject({ kind: "provisioned", credentials: { kind: "server_jwt", expiresAt: START_WALL_MS + DAY_MS } });
  });

  it("provisions a host whose certificate it cannot read, without an expiry, and says so", async () => {
    // Arrange
    const h = await harness({ helper: helperResponse({ certificate: "CERT PEM" }) });

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome).toEqual({ kind: "provisioned", identity: IDENTITY });
    expect(h.logger.at("warn").map((record) => record.message)).toContain("the helper's certificate could not be read; its expiry is not recorded");
  });
});

describe("ProvisionEngine records what it issues in the ledger before configuring", () => {
  /** The engine's record of one provisioning, and how many configure requests had left when it was made. */
  async function recorded(h: Harness): Promise<{ outcome: ProvisionOutcome; issued: IssuedCredentials; credentials: CredentialsExpiry; configuresBefore: number }> {
    const records: Array<{ issued: IssuedCredentials; credentials: CredentialsExpiry; configuresBefore: number }> = [];
    const outcome = await h.engine.provision(work(), {
      recordCredentials: async (credentials, issued) => {
        records.push({ issued, credentials, configuresBefore: h.rpc.callsTo(CONFIGURE).length });
      },
    });
    expect(records).toHaveLength(1);
    return { outcome, ...records[0]! };
  }

  it("records the server JWT's jti, exp, issuer and key, and the certificate's serial, fingerprint, issuer and key, before configure leaves", async () => {
    // Arrange
    const certificate = selfSignedCertificate(IDENTITY, 30);
    const h = await harness({ features: JWT_ED25519, helper: helperResponse({ certificate }) });

    // Act
    const { outcome, issued, credentials, configuresBefore } = await recorded(h);

    // Assert: what the node was sent is what was recorded, and recorded first.
    expect(outcome.kind).toBe("provisioned");
    expect(configuresBefore).toBe(0);
    const claims = decodeJwt(String(configureData(h).server_jwt)).claims;
    const nodeKey = h.helper.requests[0]!.ed25519_pubkey!.public_key;
    const x509 = new X509Certificate(certificate);
    expect(issued).toEqual({
      credentialId: claims.jti,
      issuedAt: START_WALL_MS,
      serverJwt: { jti: claims.jti, expiresAt: Number(claims.exp) * 1000, issuer: "Choria Provisioner", keySha256: createHash("sha256").update(Buffer.from(nodeKey, "hex")).digest("hex") },
      certificate: {
        serial: x509.serialNumber,
        sha256: x509.fingerprint256,
        issuer: x509.issuer.split("\n").join(", "),
        subject: x509.subject.split("\n").join(", "),
        notAfter: Date.parse(x509.validTo),
        keySha256: createHash("sha256").update(x509.publicKey.export({ type: "spki", format: "der" })).digest("hex"),
      },
      verdictSha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(credentials.credentialId).toBe(claims.jti);
  });

  it("keys a certificate-only issuance by the certificate's fingerprint", async () => {
    // Arrange
    const certificate = selfSignedCertificate(IDENTITY, 30);
    const h = await harness({ features: JWT_PKI, helper: helperResponse({ certificate }) });

    // Act
    const { issued, credentials } = await recorded(h);

    // Assert
    expect(issued.serverJwt).toBeUndefined();
    expect(issued.credentialId).toBe(new X509Certificate(certificate).fingerprint256);
    expect(credentials).toMatchObject({ kind: "certificate", credentialId: issued.credentialId });
  });

  it("puts nothing secret in the record: not the token, the private key, a secret setting's value, nor the helper's message", async () => {
    // Arrange: the helper returns a private key, secret settings and a message naming a secret.
    const secrets = { password: "hunter2-low-entropy", token: "s3cr3t-nats-token-value" };
    const certificate = selfSignedCertificate(IDENTITY, 30);
    const verdict = (password: string, hosts: string) =>
      helperResponse({
        certificate,
        key: keys.rsaKeyPem,
        msg: `configured with ${secrets.token}`,
        configuration: { "plugin.choria.middleware_hosts": hosts, "plugin.nats.password": password, "plugin.security.nats_token": secrets.token },
      });
    const h = await harness({ features: JWT_ED25519, helper: verdict(secrets.password, "nats://broker:4222") });

    // Act
    const { issued } = await recorded(h);

    // Assert: no secret, nor a digest of one alone, is in the record.
    const text = JSON.stringify(issued);
    const sha = (value: string) => createHash("sha256").update(value).digest("hex");
    for (const secret of [TOKEN, keys.rsaKeyPem, secrets.password, secrets.token, ...Object.values(secrets).map(sha), sha(TOKEN)]) {
      expect(text).not.toContain(secret);
    }
    expect(text).not.toContain("PRIVATE KEY");
    // The digest follows the verdict's public parts, not its secrets: another password digests alike, another broker not.
    const otherPassword = await harness({ features: JWT_ED25519, helper: verdict("another-password", "nats://broker:4222") });
    const otherBroker = await harness({ features: JWT_ED25519, helper: verdict(secrets.password, "nats://other:4222") });
    expect((await recorded(otherPassword)).issued.verdictSha256).toBe(issued.verdictSha256);
    expect((await recorded(otherBroker)).issued.verdictSha256).not.toBe(issued.verdictSha256);
  });

  it("sends nothing when the record cannot be written: the host fails at configure, to be retried", async () => {
    // Arrange
    const h = await harness({ features: JWT_ED25519 });

    // Act
    const outcome = await h.engine.provision(work(), {
      recordCredentials: async () => {
        throw new Error("the ledger did not answer");
      },
    });

    // Assert
    expect(outcome).toMatchObject({ kind: "failed", step: "configure" });
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(0);
  });
});

describe("ProvisionEngine with two machines answering as one identity (docs/audit.md)", () => {
  it("configures nothing and fails with both senders' fingerprints when the jwt request gets a second, different answer", async () => {
    // Arrange
    const h = await harness({ features: JWT });
    const twin = { jwt: h.node.provisioningJwt, ecdh_public: "ab".repeat(32) };
    h.rpc.alsoAnswer(JWT_RPC, () => twin);

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const failed = expectFailed(outcome, "helper", IdentityCollisionError);
    const evidence = (failed.error as IdentityCollisionError).evidence;
    expect(evidence.senders).toHaveLength(2);
    expect(evidence.senders[0]).toMatchObject({ jwtExpiresAt: expect.any(Number), ecdh: expect.stringMatching(/^[0-9a-f]{16}$/) });
    expect(evidence.senders[1]!.ecdh).not.toBe(evidence.senders[0]!.ecdh);
    expect(evidence.senders[1]!.jwt).toBe(evidence.senders[0]!.jwt);
    expect(h.helper.requests).toHaveLength(0);
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(0);
    // Fingerprints only: neither the token nor the JWT nor the key is in what is kept or said.
    const said = JSON.stringify(evidence) + failed.error.message;
    for (const secret of [TOKEN, h.node.provisioningJwt, twin.ecdh_public]) expect(said).not.toContain(secret);
  });

  it("without the jwt feature, configures nothing when the inventory request gets a second answer", async () => {
    // Arrange
    const h = await harness({ features: NONE });
    h.rpc.alsoAnswer(INVENTORY, () => ({ ...h.node.inventory, version: "0.29.4" }));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    const failed = expectFailed(outcome, "helper", IdentityCollisionError);
    expect((failed.error as IdentityCollisionError).evidence.senders).toEqual([{ answer: "first" }, { answer: "later", reply: expect.stringMatching(/^[0-9a-f]{16}$/) }]);
    expect(failed.error.message).toMatch(/2 different answers to one inventory request/);
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(0);
  });

  it("provisions a host whose jwt answer is handed on again unchanged", async () => {
    // Arrange
    const h = await harness({ features: JWT });
    const answer = { jwt: h.node.provisioningJwt, ecdh_public: "cd".repeat(32) };
    h.rpc.respond(JWT_RPC, () => answer);
    h.rpc.alsoAnswer(JWT_RPC, () => ({ ...answer }));

    // Act
    const outcome = await h.engine.provision(work());

    // Assert
    expect(outcome.kind).toBe("provisioned");
    expect(h.rpc.callsTo(CONFIGURE)).toHaveLength(1);
  });
});
