/**
 * Hostile or broken nodes, all in one fleet next to healthy ones, provisioned concurrently by the
 * real engine over a real nats-server: forged senders, foreign request ids, bad hashes, oversized
 * and malformed replies at every layer, slow-loris replies, broken provisioning JWTs, bad nonce
 * signatures, denied CSRs, names that would be NATS wildcards, odd inventory versions. Every
 * faulty node must end with a named error at the step it broke, never be configured, and never
 * stop a healthy neighbour from being provisioned.
 */
import { connect, type NatsConnection } from "nats";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BroadcastDiscoverer } from "../../../lib/nats/discovery";
import { UpgradeError } from "../../../lib/engine/errors";
import { CsrError, InvalidInputError, JwtError, NonceSignatureError, RpcProtocolError, RpcStatusError, RpcTimeoutError } from "../../../lib/errors";
import type { ChoriaRpc } from "../../../lib/ports/rpc";
import type { HostWork } from "../../../lib/ports/host-work";
import type { NodeFaults } from "../../../dev/simulator";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { recordScenario } from "../../support/chaos/scenario";
import { CALLER_ID, chainHas, ChaosHarness, chaosEngine, CountingHelper, describeOutcome, natsRpc, SENDER_ID } from "../../support/chaos/support";
import { CappedWaitRpc, RecordingLogger } from "../../support/fakes";

/**
 * Nodes whose replies never decide a call (forged, broken, slow) make each attempt wait this long;
 * healthy nodes get a roomy cap, as gencsr makes an RSA key first.
 */
const HOSTILE_CAP_MS = 800;
const WAIT_CAP_MS = 10_000;
/** The client's reply size limit in this suite; the oversized node pads past it. */
const MAX_REPLY_BYTES = 64 * 1024;

let harness: ChaosHarness;

beforeAll(async () => {
  harness = await ChaosHarness.start();
});
afterEach(() => harness.stopFleets());
afterAll(() => harness?.stop());

function limitedRpc(shortWait: ReadonlySet<string> = new Set()): ChoriaRpc {
  const inner = natsRpc(harness.nc, { maxReplyBytes: MAX_REPLY_BYTES });
  const hostile = new CappedWaitRpc(inner, HOSTILE_CAP_MS);
  const others = new CappedWaitRpc(inner, WAIT_CAP_MS);
  return { call: (call) => (shortWait.has(call.identity) ? hostile : others).call(call) };
}

interface HostileCase {
  faults: NodeFaults;
  /** The step the sequence must stop at. */
  step: string;
  /** A named error somewhere in the outcome's cause chain. */
  error: abstract new (...args: never[]) => Error;
}

const WIRE_CASES: Record<string, HostileCase> = {
  "forged-transport-sender": { faults: { wrongSender: { transport: "impostor.example.net" } }, step: "jwt", error: RpcProtocolError },
  "forged-envelope-sender": { faults: { wrongSender: { envelope: "impostor.example.net" } }, step: "jwt", error: RpcProtocolError },
  "reply-for-another-request": { faults: { foreignRequestId: true }, step: "jwt", error: RpcProtocolError },
  "bad-hash": { faults: { badHash: true }, step: "jwt", error: RpcProtocolError },
  oversized: { faults: { oversized: { bytes: MAX_REPLY_BYTES * 2 } }, step: "jwt", error: RpcProtocolError },
  "malformed-transport": { faults: { malformed: { layer: "transport" } }, step: "jwt", error: RpcProtocolError },
  "malformed-secure": { faults: { malformed: { layer: "secure" } }, step: "jwt", error: RpcProtocolError },
  "malformed-reply": { faults: { malformed: { layer: "reply" } }, step: "jwt", error: RpcProtocolError },
  "malformed-mcorpc": { faults: { malformed: { layer: "mcorpc" } }, step: "jwt", error: RpcProtocolError },
  "slow-loris": { faults: { delay: { ms: HOSTILE_CAP_MS * 4 } }, step: "jwt", error: RpcTimeoutError },
  "silent-after-jwt": { faults: { silent: ["inventory"] }, step: "inventory", error: RpcTimeoutError },
  "jwt-expired": { faults: { provisioningJwt: "expired" }, step: "jwt", error: JwtError },
  "jwt-foreign-key": { faults: { provisioningJwt: "foreign" }, step: "jwt", error: JwtError },
  "jwt-hs256": { faults: { provisioningJwt: "hs256" }, step: "jwt", error: JwtError },
  "jwt-garbage": { faults: { provisioningJwt: "garbage" }, step: "jwt", error: JwtError },
  "jwt-not-provisioning": { faults: { provisioningJwt: "not-provisioning" }, step: "jwt", error: JwtError },
  "jwt-missing-file": { faults: { provisioningJwt: "missing-file" }, step: "jwt", error: RpcStatusError },
  "csr-foreign-cn": { faults: { csr: { commonName: "someone-else.example.net" } }, step: "gencsr", error: CsrError },
  "csr-denied-san": { faults: { csr: { dnsNames: ["ok.example.net", "evil.privileged.choria"] } }, step: "gencsr", error: CsrError },
};

const HEALTHY = ["healthy-1.example.net", "healthy-2.example.net", "duplicating.example.net"];

describe("hostile nodes next to healthy ones (jwt + pki)", () => {
  it("stops every hostile node at the step it broke with a named error, and provisions every healthy node exactly once", async ({ task }) => {
    // Arrange
    const hostile = Object.keys(WIRE_CASES).map((name) => `${name}.example.net`);
    const faults: Record<string, NodeFaults> = Object.fromEntries(Object.entries(WIRE_CASES).map(([name, entry]) => [`${name}.example.net`, entry.faults]));
    faults["duplicating.example.net"] = { duplicate: true };
    const fleet = await harness.fleet({ identities: [...HEALTHY, ...hostile, "denied-cn.mcollective"], faults, rsaKeys: { size: 4, reuse: true } });
    const helper = new CountingHelper();
    const unanswered = new Set(Object.entries(WIRE_CASES).filter(([, entry]) => entry.error === RpcProtocolError || entry.error === RpcTimeoutError).map(([name]) => `${name}.example.net`));
    const { engine, work } = chaosEngine({ fleet, helper, features: { jwt: true, pki: true }, rpc: limitedRpc(unanswered) });

    // Act
    const outcomes = await Promise.all(fleet.identities.map((identity) => engine.provision(work(identity))));

    // Assert
    const byIdentity = new Map(outcomes.map((outcome) => [outcome.identity, outcome]));
    for (const identity of HEALTHY) {
      expect(describeOutcome(byIdentity.get(identity)!), identity).toBe("provisioned");
      expect(fleet.node(identity).provisioned, identity).toBe(1);
      expect(fleet.record.filter((entry) => entry.identity === identity && entry.action === "configure").length, identity).toBe(1);
    }
    for (const [name, expected] of Object.entries(WIRE_CASES)) {
      const identity = `${name}.example.net`;
      const outcome = byIdentity.get(identity)!;
      expect(describeOutcome(outcome), identity).toBe(`failed@${expected.step}:named`);
      expect(outcome.kind === "failed" && chainHas(outcome.error, expected.error), `${identity} has ${expected.error.name}: ${outcome.kind === "failed" ? outcome.error.message : ""}`).toBe(true);
      expect(fleet.node(identity).configuredConfig, identity).toBeUndefined();
      expect(helper.runs.has(identity), identity).toBe(false);
    }
    const denied = byIdentity.get("denied-cn.mcollective")!;
    expect(describeOutcome(denied)).toBe("failed@gencsr:named");
    expect(denied.kind === "failed" && chainHas(denied.error, CsrError)).toBe(true);
    expect(denied.kind === "failed" && denied.error.message).toMatch(/denied-cn\.mcollective matches denied certificate pattern/);
    const lost = outcomes.filter((outcome) => describeOutcome(outcome).includes("UNNAMED")).length;
    recordScenario(task, { area: "hostile-node", load: HEALTHY.length, faults: hostile.length + 2, badInputs: hostile.length + 1, hostsLost: lost });
  });

  it("retries a bad nonce signature with a fresh nonce, then fails at gen25519 without configuring (jwt + ed25519)", async ({ task }) => {
    // Arrange
    const identities = ["bad-nonce.example.net", "good-nonce.example.net"];
    const fleet = await harness.fleet({ identities, faults: { "bad-nonce.example.net": { badNonceSignature: true } } });
    const helper = new CountingHelper();
    const { engine, work } = chaosEngine({ fleet, helper, features: { jwt: true, ed25519: true }, settings: { signingKey: ed25519SigningKey(generateEd25519Seed()) }, rpc: limitedRpc() });

    // Act
    const [bad, good] = await Promise.all(identities.map((identity) => engine.provision(work(identity))));

    // Assert
    expect(describeOutcome(bad!)).toBe("failed@gen25519:named");
    expect(bad!.kind === "failed" && chainHas(bad!.error, NonceSignatureError)).toBe(true);
    expect(fleet.record.filter((entry) => entry.identity === "bad-nonce.example.net" && entry.action === "gen25519").length).toBe(5);
    expect(fleet.node("bad-nonce.example.net").configuredConfig).toBeUndefined();
    expect(describeOutcome(good!)).toBe("provisioned");
    recordScenario(task, { area: "hostile-node", load: 1, faults: 1, badInputs: 5 });
  });
});

describe("names that would widen a NATS subject", () => {
  let spy: NatsConnection;
  const published: string[] = [];

  beforeAll(async () => {
    spy = await connect({ servers: harness.nats.url });
    spy.subscribe("provisioning.>", { callback: (_error, message) => published.push(message.subject) });
    await spy.flush();
  });
  afterAll(() => spy?.close());

  it("discovery skips replies whose sender header is a wildcard, empty token or whitespace, and keeps the honest names", async ({ task }) => {
    // Arrange
    const forged = { "*": "liar-1.example.net", ">": "liar-2.example.net", "a.*.b": "liar-3.example.net", "a..b": "liar-4.example.net", "a b": "liar-5.example.net", ".lead": "liar-6.example.net" };
    const faults = Object.fromEntries(Object.entries(forged).map(([claimed, identity]) => [identity, { wrongSender: { transport: claimed, on: ["discovery#ping"] } } satisfies NodeFaults]));
    await harness.fleet({ identities: [...Object.values(forged), "honest-1.example.net", "honest-2.example.net"], faults });
    const logger = new RecordingLogger();
    const discoverer = new BroadcastDiscoverer(harness.nc, { senderId: SENDER_ID, callerId: CALLER_ID, protocolVersion: 1, signer: { version: 1, kind: "insecure" }, discoveryTimeoutMs: 1_500, logger });

    // Act
    const result = await discoverer.discoverWithStats();

    // Assert
    expect([...result.identities].sort()).toEqual(["honest-1.example.net", "honest-2.example.net"]);
    expect(result.skipped).toBe(Object.keys(forged).length);
    expect(logger.at("warn").map((warning) => warning.attributes?.sender).sort()).toEqual(Object.keys(forged).sort());
    for (const warning of logger.at("warn")) expect(warning.attributes?.reason).toMatch(/wildcard|empty subject token/);
    recordScenario(task, { area: "hostile-node", load: 2, faults: Object.keys(forged).length, badInputs: Object.keys(forged).length });
  });

  it("refuses to provision a wildcard identity with InvalidInputError and publishes nothing on a wildcard subject", async ({ task }) => {
    // Arrange
    const fleet = await harness.fleet({ identities: ["bystander.example.net"] });
    const { engine, work: admitted } = chaosEngine({ fleet, helper: new CountingHelper(), rpc: limitedRpc() });
    const names = ["*", ">", "node.*", "node.>", "a..b", "", "a b", "x\r\nPUB provisioning.node.bystander.example.net 2"];
    const work = (identity: string): HostWork => ({ ...admitted("placeholder.example.net"), identity, source: "event" });
    published.length = 0;

    // Act
    const outcomes = await Promise.all(names.map((identity) => engine.provision(work(identity))));
    await spy.flush();

    // Assert
    for (const outcome of outcomes) {
      expect(describeOutcome(outcome), JSON.stringify(outcome.identity)).toMatch(/^failed@inventory:named$/);
      expect(outcome.kind === "failed" && chainHas(outcome.error, InvalidInputError)).toBe(true);
    }
    expect(published.filter((subject) => /[*>\s]|\.\.|\.$/.test(subject))).toEqual([]);
    expect(fleet.record.filter((entry) => entry.identity === "bystander.example.net")).toEqual([]);
    recordScenario(task, { area: "hostile-node", badInputs: names.length });
  });
});

describe("inventory claiming odd versions (upgrades on)", () => {
  it("either upgrades, carries on, or fails at the upgrade step with UpgradeError; never configures a node it could not judge", async ({ task }) => {
    // Arrange
    const versions = ["", "0.31.0", "v0.31.0", "0.31.0-rc.1", "0.31.0~beta", "9".repeat(400), "💥", "0..1", "../../etc/passwd", " 0.31.0 "];
    const identities = versions.map((_version, index) => `odd-version-${index}.example.net`);
    const faults = Object.fromEntries(identities.map((identity, index) => [identity, { inventoryVersion: versions[index] } satisfies NodeFaults]));
    const fleet = await harness.fleet({ identities, faults, upgradable: true });
    const helper = new CountingHelper({ upgrade: "0.31.0" });
    const { engine, work } = chaosEngine({ fleet, helper, features: { upgrades: true }, rpc: limitedRpc() });

    // Act
    const outcomes = await Promise.all(identities.map((identity) => engine.provision(work(identity))));

    // Assert
    outcomes.forEach((outcome, index) => {
      const described = describeOutcome(outcome);
      expect(["upgrading", "provisioned", "failed@upgrade:named"], `${JSON.stringify(versions[index])} -> ${described}`).toContain(described);
      if (outcome.kind === "failed") expect(chainHas(outcome.error, UpgradeError)).toBe(true);
      const configured = fleet.record.some((entry) => entry.identity === outcome.identity && entry.action === "configure");
      expect(configured, outcome.identity).toBe(outcome.kind === "provisioned");
    });
    expect(describeOutcome(outcomes[0]!)).toBe("failed@upgrade:named");
    expect(describeOutcome(outcomes[1]!)).toBe("provisioned");
    recordScenario(task, { area: "hostile-node", load: identities.length, badInputs: versions.length });
  });
});
