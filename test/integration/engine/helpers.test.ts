/**
 * The example helpers as a site would deploy them: provision-helper.mjs and provision-helper.sh
 * through the process runner, lambda-helper.ts through the Lambda runner. Each configures a node,
 * defers one and shuts one down.
 */
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { verifyJwtSignature } from "../../support/choria-node/jwt-signature";
import { DeferredError } from "../../../lib/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import { LambdaHelperRunner } from "../../../lib/helper/lambda-runner";
import { METRIC } from "../../../lib/ports/metric-names";
import type { HelperRunner } from "../../../lib/ports/helper";
import { handler } from "../../../examples/helpers/lambda-helper";
import { EngineHarness, inProcessInvoke, MJS_HELPER, newSigningKey, nodePublicKeyHex, requestsTo, restarted, SH_HELPER } from "./support";
import { presentedJwt, serverJwtExpiry } from "../../support/server-jwt-expiry";

let harness: EngineHarness;

beforeAll(async () => {
  harness = await EngineHarness.start(inject("dynamoEndpoint"));
});
afterEach(() => harness.stopFleets());
afterAll(() => harness?.stop());

const runners: Array<[string, () => HelperRunner]> = [
  ["provision-helper.mjs (process)", () => new ExecHelperRunner({ command: MJS_HELPER })],
  ["provision-helper.sh (process)", () => new ExecHelperRunner({ command: SH_HELPER })],
  ["lambda-helper.ts (Lambda)", () => new LambdaHelperRunner({ invoke: inProcessInvoke(handler), name: "example-provision-helper" })],
];

describe.each(runners)("the example helper %s", (name, runner) => {
  const slug = name.split(" ")[0]?.replace(/[^a-z]+/g, "-") ?? "helper";

  it("configures a node for the choria security provider with a server JWT", async () => {
    const identity = `ok-${slug}.example.net`;
    const fleet = await harness.fleet({ identities: [identity] });
    const signingKey = newSigningKey();
    const { engine, work } = await harness.engine({ fleet, helper: runner(), features: { jwt: true, ed25519: true }, settings: { signingKey } });

    const outcome = await engine.provision(work(identity));
    await restarted(fleet, identity);

    expect(outcome).toEqual({ kind: "provisioned", identity, credentials: serverJwtExpiry(fleet, identity), provisioningJwt: presentedJwt(fleet) });
    const node = fleet.node(identity);
    expect(node.configuredConfig).toEqual({
      identity,
      loglevel: "info",
      collectives: "mcollective",
      "plugin.choria.server.provision": "false",
      "plugin.choria.middleware_hosts": "nats://broker.example.net:4222",
      "plugin.security.provider": "choria",
      "plugin.security.choria.token_file": "/etc/choria/server.jwt",
      "plugin.security.choria.seed_file": "/etc/choria/server.seed",
    });
    const nodePublicKey = nodePublicKeyHex(node);
    expect(verifyJwtSignature(node.serverJwt ?? "", signingKey.publicKey)).toMatchObject({ identity, public_key: nodePublicKey });
    expect(node.inProvisioningMode).toBe(false);
  });

  it("defers a defer- node: nothing is configured and the node stays in provisioning mode", async () => {
    const identity = `defer-${slug}.example.net`;
    const fleet = await harness.fleet({ identities: [identity] });
    const { engine, work } = await harness.engine({ fleet, helper: runner(), features: { jwt: true } });

    const outcome = await engine.provision(work(identity));

    expect(outcome).toMatchObject({ kind: "deferred", identity });
    expect(outcome.kind === "deferred" && outcome.error).toBeInstanceOf(DeferredError);
    expect(outcome.kind === "deferred" && outcome.error.message).toBe(
      `configuration defered: provisioning of ${identity} deferred by the example helper`,
    );
    expect(requestsTo(fleet, identity)).toEqual(["jwt:0", "inventory:0"]);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
    expect(fleet.node(identity).inProvisioningMode).toBe(true);
  });

  it("shuts a shutdown- node down: the node receives the shutdown request and stops", async () => {
    const identity = `shutdown-${slug}.example.net`;
    const fleet = await harness.fleet({ identities: [identity] });
    const { engine, metrics, work } = await harness.engine({ fleet, helper: runner() });

    const outcome = await engine.provision(work(identity));
    await fleet.waitFor(() => !fleet.node(identity).isRunning, 5_000);

    expect(outcome).toEqual({ kind: "shutdown", identity, acknowledged: true });
    expect(requestsTo(fleet, identity)).toEqual(["inventory:0", "shutdown:0"]);
    expect(metrics.total(METRIC.helperShutdownRequests)).toBe(1);
    expect(fleet.node(identity).configuredConfig).toBeUndefined();
  });
});
