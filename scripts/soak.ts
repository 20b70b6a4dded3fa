/**
 * The long soak of the leadership chaos scenarios: deployments contend for one site on a DynamoDB
 * Local of their own while a seeded schedule keeps injecting faults (leader killed and replaced,
 * graceful release, lease writes held back past the lease, nats-server restarted) and new nodes
 * keep arriving. At the end the faults stop, the fleet drains, and the run fails when a node was
 * lost, a deposed leader sent after a newer term began, or an admission was configured twice.
 *
 *   npx tsx scripts/soak.ts --minutes 5 [--nodes 100] [--seed 7] [--out soak.json]
 *
 * Time runs SCALE times faster on the deployments' clocks (see test/support/chaos/deployments.ts),
 * so five minutes of real time are close to an hour of lease and discovery activity.
 */
import { parseArgs } from "node:util";
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";

import { createLeaseTable } from "../lib/lease/dynamodb-lease-store";
import { MemoryAdmissionStore } from "../lib/admission/memory-admission-store";
import { LOCAL_AWS, startDynamoDbLocal, startNats } from "../dev/local/services";
import { startFleet } from "../dev/simulator";
import { ChaosDeployment, LEASE, Observatory, SCALE, scaledClock, unprovisioned } from "../test/support/chaos/deployments";
import { TOKEN } from "../test/support/chaos/support";
import { seededRandom } from "../test/support/random";

type FaultKind = "kill-leader" | "release" | "delay-writes" | "restart-nats" | "add-nodes";
const FAULTS: readonly FaultKind[] = ["kill-leader", "release", "delay-writes", "restart-nats", "add-nodes"];
const FAULT_EVERY_MS = 6_000;
const DRAIN_MS = 90_000;

/** A usage mistake: one line, exit 2, as in every command of the project. */
function usageError(message: string): never {
  process.stderr.write(`soak: ${message}\n`);
  process.exit(2);
}

function parseOptions() {
  try {
    return parseArgs({ options: { minutes: { type: "string" }, nodes: { type: "string" }, seed: { type: "string" }, out: { type: "string" } } }).values;
  } catch (error) {
    usageError((error as Error).message);
  }
}

const options = parseOptions();

function option(name: "minutes" | "nodes" | "seed", fallback: number): number {
  const text = options[name];
  const value = text === undefined ? fallback : Number(text);
  if (!Number.isFinite(value) || value <= 0) usageError(`--${name} must be a positive number, got "${text}"`);
  return value;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = "true";
  const minutes = option("minutes", 5);
  const nodes = option("nodes", 100);
  const random = seededRandom(option("seed", 7));
  const out = options.out;

  const nats = await startNats();
  const dynamoDb = await startDynamoDbLocal();
  const dynamo = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamoDb.url });
  const tableName = `soak-lease-${randomUUID()}`;
  await createLeaseTable(dynamo, tableName);
  const fleet = await startFleet({ natsUrl: nats.url, count: nodes, identityPrefix: "soak", token: TOKEN, restartDelayMs: 20, recordDiscovery: false, rsaKeys: { size: 4, reuse: true }, clock: scaledClock() });
  const observatory = new Observatory();
  const site = `soak-${randomUUID()}`;
  const admissionStore = new MemoryAdmissionStore();

  const alive: ChaosDeployment[] = [];
  const retired: ChaosDeployment[] = [];
  let named = 0;

  const launch = async (): Promise<ChaosDeployment> => {
    const name = `deployment-${++named}`;
    const deployment = await ChaosDeployment.create({ name, site, tableName, admissionStore, natsUrl: nats.url, dynamoEndpoint: dynamoDb.url, fleet, observatory });
    deployment.start();
    alive.push(deployment);
    return deployment;
  };
  const retire = (deployment: ChaosDeployment) => {
    alive.splice(alive.indexOf(deployment), 1);
    retired.push(deployment);
  };
  const leader = (): ChaosDeployment | undefined => {
    const latest = observatory.terms.at(-1)?.deployment;
    return alive.find((deployment) => deployment.name === latest);
  };

  await launch();
  await launch();
  const injected: Record<FaultKind, number> = { "kill-leader": 0, release: 0, "delay-writes": 0, "restart-nats": 0, "add-nodes": 0 };
  const deadline = performance.now() + minutes * 60_000;
  let delayed: ChaosDeployment | undefined;

  while (performance.now() < deadline) {
    await sleep(FAULT_EVERY_MS);
    delayed?.delayStoreWrites(0);
    delayed = undefined;
    const kind = FAULTS[Math.floor(random() * FAULTS.length)] as FaultKind;
    const current = leader();
    switch (kind) {
      case "kill-leader":
        if (!current) continue;
        current.kill();
        retire(current);
        await launch();
        break;
      case "release":
        if (!current) continue;
        retire(current);
        await current.stopAndRelease();
        await launch();
        break;
      case "delay-writes":
        if (!current) continue;
        current.delayStoreWrites((LEASE.leaseDurationMs * 2) / SCALE);
        delayed = current;
        break;
      case "restart-nats":
        await nats.restart();
        break;
      case "add-nodes":
        await fleet.addNodes(Math.ceil(nodes / 10));
        break;
    }
    injected[kind] += 1;
    console.log(`${new Date().toISOString()} ${kind}: ${fleet.identities.length - unprovisioned(fleet).length}/${fleet.identities.length} provisioned, ${observatory.terms.length} terms, ${observatory.crossTermExecutions(fleet).length} executions across terms at the nodes`);
  }

  delayed?.delayStoreWrites(0);
  const drainUntil = performance.now() + DRAIN_MS;
  while (unprovisioned(fleet).length > 0 && performance.now() < drainUntil) await sleep(500);

  const summary = {
    minutes,
    scale: SCALE,
    nodes: fleet.identities.length,
    provisioned: fleet.identities.length - unprovisioned(fleet).length,
    hostsLost: unprovisioned(fleet).length,
    crossTermExecutions: observatory.crossTermExecutions(fleet).length,
    terms: observatory.terms.length,
    deployments: named,
    rpcsRunAtNodes: observatory.executions(fleet).attributed.length,
    faults: injected,
  };
  console.log(JSON.stringify(summary, null, 2));
  if (out) writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);

  for (const deployment of alive) deployment.kill();
  await Promise.all([...alive, ...retired].map((deployment) => deployment.shutdown()));
  await fleet.stop();

  dynamo.destroy();
  await dynamoDb.stop();
  await nats.stop();
  process.exitCode = summary.hostsLost === 0 && summary.crossTermExecutions === 0 ? 0 : 1;
}

await main();
