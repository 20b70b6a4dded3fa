/**
 * Two real go-choria servers started with the same identity in provisioning mode, beside other
 * nodes (docs/audit.md): neither twin is provisioned (checked at the node: no configuration
 * written, no restart), the quarantine shows both senders, the quarantine gauge the alarm watches
 * is emitted, and the other nodes are provisioned. Then one twin is stopped and the identity
 * released with the CLI as docs/audit.md says: the next discovery provisions the survivor.
 * Protocol v2 with jwt + ed25519, where discovery tells the twins' replies apart (v2 times are in
 * ns), and protocol v1 with jwt + pki, where two twins' discovery replies in one second are
 * identical (v1 times are whole seconds) and the engine's check on the `jwt` answers (each server
 * process has its own key exchange key) catches them; either path may come first.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runCli } from "../../cli/cli";
import type { QuarantinedHost } from "../../lib/admission/quarantine";
import { EXTRA_METRIC } from "../../lib/ports/metric-names";
import { provisionedFleet, provisioningActions, waitForArrivals, waitUntil, type ProvisionedFleet } from "../../dev/local/real-fleet-stack";
import { retriedOnPortClash } from "../support/port-clash";
import { NODE_CONNECT_BOUND_MS, provisionBoundMs, termBoundMs } from "../support/real-fleet-bounds";

const FLEETS = [
  { version: 2, protocolV2: true, features: ["jwt", "ed25519"] },
  { version: 1, protocolV2: false, features: ["jwt", "pki"] },
] as const;
/** The second machine answering as TWIN, kept under this name in the fleet. */
const SECOND = "twin-second";
const SETUP_HOOK_MS = 25 * 60_000;

describe.each(FLEETS)("real fleet, protocol v$version: two servers with one identity are quarantined, not provisioned", ({ version, protocolV2, features }) => {
  const OTHERS = [`n1.q${version}.real.example.net`, `n2.q${version}.real.example.net`];
  const TWIN = `twin.q${version}.real.example.net`;
  let provisioned: ProvisionedFleet;
  let quarantined: QuarantinedHost[] = [];
  let survivorBoundMs = 0;

  /** `choria-provisioner <args> --json` against the stack's tables, as an operator runs it. */
  async function cli<T>(...args: string[]): Promise<{ code: number; value: T | undefined; stderr: string }> {
    const { stack } = provisioned;
    let stdout = "";
    let stderr = "";
    const code = await runCli(
      [...args, "--json", "--site", stack.site, "--lease-table", stack.tables.lease, "--admission-table", stack.tables.admission, "--dynamodb-endpoint", inject("dynamoEndpoint")],
      { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text), env: { PROVISIONER_DEPLOYMENT_ID: "primary" } },
    );
    return { code, value: stdout ? (JSON.parse(stdout) as T) : undefined, stderr };
  }

  beforeAll(async () => {
    provisioned = await retriedOnPortClash(() =>
      provisionedFleet({ identities: [...OTHERS, TWIN], protocolV2, features: [...features], dynamoDbEndpoint: inject("dynamoEndpoint") }),
    );
    const { fleet, stack } = provisioned;
    await fleet.addNode(TWIN, { name: SECOND, start: false });
    const timings = stack.timings;
    survivorBoundMs = timings.discoverRateMs + provisionBoundMs(timings);
    await fleet.startAll();
    // Both twins announced themselves in provisioning mode: from then on both answer discovery and the node subject.
    await waitUntil(() => {
      const twins = provisioned.provisioningEvents.of("startup", "provision_mode_server").filter((event) => event.identity === TWIN).length;
      const others = provisioned.provisioningEvents.identities("startup", "provision_mode_server");
      return twins >= 2 && OTHERS.every((identity) => others.has(identity)) ? undefined : `${twins} twin startup events, others ${[...others].join(", ")}`;
    }, NODE_CONNECT_BOUND_MS);
    stack.start();
    await waitForArrivals(provisioned, OTHERS, termBoundMs(timings) + provisionBoundMs(timings));
    const deadline = Date.now() + timings.discoverRateMs + provisionBoundMs(timings);
    while (!quarantined.some((host) => host.identity === TWIN) && Date.now() < deadline) {
      quarantined = (await cli<QuarantinedHost[]>("quarantine", "list")).value ?? [];
      if (!quarantined.some((host) => host.identity === TWIN)) await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    // A discovery after the quarantine sets the gauge.
    await waitUntil(() => ((stack.deployments[0]!.metrics.last(EXTRA_METRIC.hostsQuarantined) ?? 0) >= 1 ? undefined : "no quarantine gauge yet"), timings.discoverRateMs * 3);
  }, SETUP_HOOK_MS);

  afterAll(async () => {
    await provisioned?.stop();
  });

  it("quarantines the twin with the evidence of both senders, and nothing secret in it", () => {
    const twin = quarantined.find((host) => host.identity === TWIN);
    expect(twin?.reason).toMatch(/two machines answer as this identity/);
    expect(twin?.senders.length).toBeGreaterThanOrEqual(2);
    const fingerprints = twin?.senders.map((sender) => sender.ecdh ?? sender.reply);
    expect(new Set(fingerprints).size).toBe(twin?.senders.length);
    for (const fingerprint of fingerprints ?? []) expect(fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(JSON.stringify(twin)).not.toContain(provisioned.fleet.token);
    expect(JSON.stringify(twin)).not.toContain(provisioned.fleet.provisioningJwt.trim());
  });

  it("configures neither twin, provisions the other nodes, and emits the gauge the alarm watches", async () => {
    for (const name of [TWIN, SECOND]) {
      const node = provisioned.fleet.nodes.get(name)!;
      expect({ name, ...(await provisioningActions(node)) }).toEqual({ name, configured: 0, restarted: 0 });
      expect(await node.config()).toBeUndefined();
    }
    for (const identity of OTHERS) expect(await provisioningActions(provisioned.fleet.nodes.get(identity)!)).toEqual({ configured: 1, restarted: 1 });
    expect(provisioned.stack.deployments[0]!.metrics.last(EXTRA_METRIC.hostsQuarantined)).toBeGreaterThanOrEqual(1);
  });

  it("provisions the survivor once the second machine is stopped and the identity released", async () => {
    // Arrange
    await provisioned.fleet.nodes.get(SECOND)!.stop();

    // Act
    const released = await cli<{ identity: string; released: boolean }>("quarantine", "release", TWIN);
    await waitForArrivals(provisioned, [TWIN], survivorBoundMs);

    // Assert
    expect(released).toMatchObject({ code: 0, value: { identity: TWIN, released: true } });
    expect(await provisioningActions(provisioned.fleet.nodes.get(TWIN)!)).toEqual({ configured: 1, restarted: 1 });
    expect(await provisioningActions(provisioned.fleet.nodes.get(SECOND)!)).toEqual({ configured: 0, restarted: 0 });
    expect((await cli<QuarantinedHost[]>("quarantine", "list")).value).toEqual([]);
  }, 10 * 60_000);
});
