/**
 * The whole product on the local stack: real nats-server, DynamoDB Local and fauxqs, 200 simulated
 * nodes, the real handlers under the emulated Lambda runtime, and two deployments of which only the
 * lease holder may act. Each deployment gets its own `callerid` (a test-only marker; production
 * deployments of a site share it so node locks survive a failover), so the fleet's request record
 * shows which deployment sent every request, discovery pings included.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { runLocal, type RunSummary } from "../../dev/local/run";
import { startLocalStack, type LocalStack } from "../../dev/local/stack";
import { METRIC } from "../../lib/ports/metric-names";
import { RecordingLogger } from "../support/fakes";

/** What the deployments said about the lease, for a failure message. */
const leaseLines = (logger: RecordingLogger) =>
  logger.records
    .filter((record) => record.level !== "debug" && /lease|term|paused|standby/i.test(record.message))
    .slice(-30)
    .map((record) => `${record.level} ${record.message} ${JSON.stringify(record.attributes ?? {})}`)
    .join("\n");

const NODES = 200;
const DEPLOYMENTS = ["blue", "green"];
const callerOf = (deployment: string) => `choria=provisioner-${deployment}`;

describe("local stack end to end", () => {
  const logger = new RecordingLogger();
  let stack: LocalStack;
  let summary: RunSummary;

  beforeAll(async () => {
    stack = await startLocalStack({
      nodes: NODES,
      deployments: DEPLOYMENTS,
      fast: true,
      helper: "bash",
      distinctCallerIds: true,
      restartDelayMs: 200,
      fleet: { recordDiscovery: true },
      dynamoDbEndpoint: inject("dynamoEndpoint"),
      waitTimeSeconds: 1,
      // These tests are about the standby staying paused while the leader lives; a takeover is the
      // chaos and kill-leader suites' subject. With fast mode's 30 s lease, a machine that starves the
      // leader's renewals for its lease plus the delivery horizon (~61 s) makes the standby a
      // rightful holder; ten minutes puts that out of a loaded run's reach.
      timings: { lease: { duration: "600s", renew_interval: "2s", skew_bound: "1s" } },
      logger,
    });
    // The run returns as soon as every node is provisioned. Its bound follows the stack's own: work
    // that went back returns by the next 15 s discovery or the 70 s host-work visibility (fast
    // timings), a few times over on a loaded machine; the assertions judge what happened, not how fast.
    summary = await runLocal(stack, { timeoutMs: 240_000 });
    await stack.fleet.waitFor(() => stack.fleet.identities.every((identity) => !stack.fleet.node(identity).inProvisioningMode), 60_000);
  }, 330_000);

  afterAll(async () => {
    await stack?.stop();
  }, 30_000);

  it("provisions every node, none lost or dead-lettered", () => {
    expect(summary.outcome).toBe("all-provisioned");
    expect(summary.provisioned).toBe(NODES);
    expect(summary.unprovisioned).toEqual([]);
    expect(summary.deadLetters).toEqual([]);
  });

  it("configures and restarts every node exactly once, and every node leaves provisioning mode", () => {
    const requests = new Map<string, { configure: number; restart: number }>();
    for (const entry of stack.fleet.record) {
      if (entry.agent !== "choria_provision" || (entry.action !== "configure" && entry.action !== "restart")) continue;
      const counts = requests.get(entry.identity) ?? { configure: 0, restart: 0 };
      counts[entry.action]++;
      requests.set(entry.identity, counts);
    }

    for (const identity of stack.fleet.identities) {
      const node = stack.fleet.node(identity);
      expect({ identity, ...requests.get(identity) }).toEqual({ identity, configure: 1, restart: 1 });
      expect(node.restarts).toBe(1);
      expect(node.inProvisioningMode).toBe(false);
      expect(node.configuredConfig?.["plugin.choria.server.provision"]).toBe("false");
    }
  });

  it("sends nothing from the paused deployment: every request comes from the lease holder", async () => {
    const lease = await stack.lease();
    const leader = lease?.holder;
    const standby = DEPLOYMENTS.find((id) => id !== leader);
    const callers = new Map<string, number>();
    for (const entry of stack.fleet.record) callers.set(entry.caller, (callers.get(entry.caller) ?? 0) + 1);
    const fromDeployment = (id: string) =>
      [...callers.entries()].filter(([caller]) => caller.endsWith(`.${callerOf(id)}`)).reduce((sum, [, count]) => sum + count, 0);
    const standbyMetrics = stack.deployments.find((deployment) => deployment.id === standby)?.metrics;

    expect(summary.leaseChanges.map((change) => change.holder), `${JSON.stringify(summary.leaseChanges)}\n${leaseLines(logger)}`).toEqual([leader]);
    expect(fromDeployment(leader ?? "")).toBeGreaterThanOrEqual(NODES * 2);
    expect(fromDeployment(standby ?? "")).toBe(0);
    expect([...callers.keys()].filter((caller) => caller !== "" && !DEPLOYMENTS.some((id) => caller.endsWith(`.${callerOf(id)}`)))).toEqual([]);
    expect(standbyMetrics?.find(METRIC.rpcTime)).toEqual([]);
    expect(standbyMetrics?.find(METRIC.helperTime)).toEqual([]);
    expect(standbyMetrics?.last(METRIC.paused)).toBe(1);
  });

  it("runs the deployments as separate stacks on the site's one lease table and one admission table, the second starting paused", () => {
    const [blue, green] = stack.deployments;

    expect(summary.leaseChanges[0]?.holder).toBe("blue");
    expect(blue?.tables.lease).toBe(green?.tables.lease);
    expect(blue?.tables.admission).toBe(green?.tables.admission);
    expect(blue?.queues.lifecycle).not.toBe(green?.queues.lifecycle);
    expect(blue?.env.LIFECYCLE_CONSUMER).toBeUndefined();
    expect(green?.env.LIFECYCLE_CONSUMER).toBeUndefined();
  });

  it("counts every provisioning-mode startup event end to end: all reach the leader, none lost", async () => {
    const events = await stack.lifecycleEvents();

    expect(events.published).toBe(NODES);
    expect(events.reachedLeader.blue).toBeGreaterThanOrEqual(NODES);
    expect(events.reachedLeader.green).toBe(0);
    expect(events).toMatchObject({ droppedPaused: 0, deadLettered: 0, pendingInStream: 0, noneLost: true });
  });
});
