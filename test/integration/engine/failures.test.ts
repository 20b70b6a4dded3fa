/**
 * Every way a provisioning run fails, on real services: the outcome names the step and the error,
 * and the simulated node shows what it was (and was not) asked.
 */
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { RpcRetriesExhaustedError } from "../../../lib/engine/errors";
import {
  CsrError,
  HelperError,
  JwtError,
  NonceSignatureError,
  RpcStatusError,
  RpcTimeoutError,
  type ProvisionerError,
} from "../../../lib/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import { METRIC } from "../../../lib/ports/metric-names";
import type { NodeFaults, ProvisioningJwtFault } from "../../../dev/simulator";
import type { ProvisionOutcome } from "../../../lib/engine/outcome";
import { EngineHarness, MJS_HELPER, newSigningKey, recordsOf, requestsTo } from "./support";

let harness: EngineHarness;

beforeAll(async () => {
  harness = await EngineHarness.start(inject("dynamoEndpoint"));
});
afterEach(() => harness.stopFleets());
afterAll(() => harness?.stop());

const exampleHelper = () => new ExecHelperRunner({ command: MJS_HELPER });

/** The failure's step and error, or a test failure naming the outcome that came instead. */
function failure(outcome: ProvisionOutcome): { step: Extract<ProvisionOutcome, { kind: "failed" }>["step"]; error: ProvisionerError } {
  if (outcome.kind !== "failed") throw new Error(`expected a failed outcome, got ${outcome.kind}`);
  expect(outcome.retryable).toBe(false);
  return { step: outcome.step, error: outcome.error };
}

async function nodeWith(identity: string, faults: NodeFaults = {}) {
  return harness.fleet({ identities: [identity], faults: { [identity]: faults } });
}

describe("provisioning JWT", () => {
  it.each<[ProvisioningJwtFault, RegExp]>([
    ["expired", /token is expired/],
    ["foreign", /signature/i],
    ["hs256", /HS256/],
  ])("a %s JWT fails the jwt step and nothing else is asked of the node", async (fault, reason) => {
    const identity = `jwt-${fault}.example.net`;
    const fleet = await nodeWith(identity, { provisioningJwt: fault });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true } });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("jwt");
    expect(error).toBeInstanceOf(JwtError);
    expect(error.message).toMatch(new RegExp(`^could not validate JWT from ${identity}: `));
    expect(error.message).toMatch(reason);
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
    expect(fleet.node(identity).inProvisioningMode).toBe(true);
  });
});

describe("ed25519 nonce", () => {
  it("a signature over something other than the nonce fails every gen25519 try", async () => {
    const identity = "bad-nonce.example.net";
    const fleet = await nodeWith(identity, { badNonceSignature: true });
    const { engine, work } = await harness.engine({
      fleet,
      helper: exampleHelper(),
      features: { jwt: true, ed25519: true },
      settings: { signingKey: newSigningKey() },
    });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("gen25519");
    expect(error).toBeInstanceOf(RpcRetriesExhaustedError);
    expect(error.cause).toBeInstanceOf(NonceSignatureError);
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", ...Array<string>(5).fill("gen25519:0")]);
    expect(fleet.node(identity).serverJwt).toBeUndefined();
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
  });
});

describe("CSR validation", () => {
  it.each<[string, string, NodeFaults, RegExp]>([
    ["a denied DNS SAN", "san.example.net", { csr: { dnsNames: ["san.example.net", "san.privileged.choria"] } }, /^san\.privileged\.choria matches denied certificate pattern$/],
    ["a CN ending in .mcollective", "denied.mcollective", {}, /^denied\.mcollective matches denied certificate pattern$/],
    ["a CN other than the identity", "mismatch.example.net", { csr: { commonName: "other.example.net" } }, /^common name other\.example\.net does not match identity mismatch\.example\.net$/],
  ])("%s fails the gencsr step before the helper runs", async (_case, identity, faults, reason) => {
    const fleet = await nodeWith(identity, faults);
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true, pki: true } });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("gencsr");
    expect(error).toBeInstanceOf(CsrError);
    expect(error.message).toMatch(reason);
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "inventory:0", "gencsr:0"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
  });
});

describe("helper failures", () => {
  it.each<[string, string, string, number | undefined, RegExp]>([
    ["times out", "slow.mjs", "setTimeout(() => {}, 30_000);", 300, /\/slow\.mjs timed out after 300 ms$/],
    [
      "crashes",
      "crash.mjs",
      'process.stdout.write("{\\"defer\\": ");\nprocess.stderr.write("segfault in site logic\\n");\nprocess.exit(3);',
      undefined,
      /\/crash\.mjs exited with code 3; stderr: segfault in site logic$/,
    ],
    [
      "prints garbage",
      "garbage.mjs",
      'for await (const _ of process.stdin);\nprocess.stdout.write("this is not json");',
      undefined,
      /^cannot decode output from \S*\/garbage\.mjs: not valid JSON/,
    ],
  ])("a helper that %s fails the helper step, is counted, and the node is left unconfigured", async (_behaviour, script, body, timeoutMs, reason) => {
    const identity = `helper-${script.replace(".mjs", "")}.example.net`;
    const fleet = await nodeWith(identity);
    const helper = new ExecHelperRunner({ command: await harness.helperScript(script, body), ...(timeoutMs ? { timeoutMs } : {}) });
    const { engine, metrics, work } = await harness.engine({ fleet, helper, features: { jwt: true } });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("helper");
    expect(error).toBeInstanceOf(HelperError);
    expect(error.message).toMatch(reason);
    expect(metrics.total(METRIC.helperErrors)).toBe(1);
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "inventory:0"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
    expect(fleet.node(identity).inProvisioningMode).toBe(true);
  });

  it("a shutdown the node refuses is reported unacknowledged and not counted as a shutdown request", async () => {
    const identity = "shutdown-refused.example.net";
    const fleet = await nodeWith(identity, { status: { shutdown: { statuscode: 1, statusmsg: "shutdown is disabled" } } });
    const { engine, metrics, work } = await harness.engine({ fleet, helper: exampleHelper() });

    const outcome = await engine.provision(work(identity));

    expect(outcome).toEqual({ kind: "shutdown", identity, acknowledged: false });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "shutdown:1"]);
    expect(metrics.total(METRIC.helperShutdownRequests)).toBe(0);
  });
});

describe("node replies", () => {
  it("an error status on every inventory try fails the inventory step with the node's status", async () => {
    const identity = "inventory-error.example.net";
    const fleet = await nodeWith(identity, { status: { "rpcutil#inventory": { statuscode: 1, statusmsg: "inventory unavailable" } } });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true } });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("inventory");
    expect(error).toBeInstanceOf(RpcRetriesExhaustedError);
    expect(error.cause).toBeInstanceOf(RpcStatusError);
    expect(error.cause).toMatchObject({ sender: identity, statuscode: 1, statusmsg: "inventory unavailable" });
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", ...Array<string>(5).fill("inventory:1")]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
  });

  it("a provisioner with the wrong token is refused by the node on every jwt try", async () => {
    const identity = "wrong-token.example.net";
    const fleet = await nodeWith(identity);
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true }, settings: { token: "not-the-token" } });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("jwt");
    expect(error.cause).toMatchObject({ statuscode: 1, statusmsg: "Incorrect provision token supplied" });
    expect(requestsTo(fleet, identity)).toEqual(["jwt:1", "jwt:1", "jwt:1"]);
    expect(recordsOf(fleet, identity).every((entry) => entry.statusmsg === "Incorrect provision token supplied")).toBe(true);
  });

  it("a node that never replies fails the step after every try timed out", async () => {
    const identity = "silent.example.net";
    const fleet = await nodeWith(identity, { silent: ["rpcutil#inventory"] });
    const { engine, work } = await harness.engine({ fleet, helper: exampleHelper(), features: { jwt: true }, rpcWaitCapMs: 250 });

    const { step, error } = failure(await engine.provision(work(identity)));

    expect(step).toBe("inventory");
    expect(error).toBeInstanceOf(RpcRetriesExhaustedError);
    expect(error.cause).toBeInstanceOf(RpcTimeoutError);
    expect(error.message).toBe(`rpcutil#inventory to ${identity} failed: gave up after 5 tries: no reply within 250 ms`);
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", ...Array<string>(5).fill("inventory:dropped")]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
  });
});
