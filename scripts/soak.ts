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

import { createLeaseTable } from "../dev/local/resources";
import { MemoryAdmissionStore } from "../test/support/stores/memory-admission-store";
import { LOCAL_AWS, type RunningNats, startDynamoDbLocal, startNats } from "../dev/local/services";
import { type Fleet, startFleet } from "../dev/simulator";
import { ChaosDeployment, type DeploymentOptions, LEASE, Observatory, SCALE, scaledClock, unprovisioned } from "../test/support/chaos/deployments";
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
  const contenders = new Contenders({ site, tableName, admissionStore: new MemoryAdmissionStore(), natsUrl: nats.url, dynamoEndpoint: dynamoDb.url, fleet, observatory });

  await contenders.launch();
  await contenders.launch();
  const faults = new FaultInjector({ nats, fleet, observatory, contenders, nodes });
  await faults.injectFor(minutes * 60_000, random);

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
    deployments: contenders.launched,
    rpcsRunAtNodes: observatory.executions(fleet).attributed.length,
    faults: faults.injected,
  };
  console.log(JSON.stringify(summary, null, 2));
  if (out) writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);

  await contenders.shutdown();
  await fleet.stop();

  dynamo.destroy();
  await dynamoDb.stop();
  await nats.stop();
  process.exitCode = summary.hostsLost === 0 && summary.crossTermExecutions === 0 ? 0 : 1;
}

/** The deployments contending for the site: those still running, and those killed or released. */
class Contenders {
  private readonly alive: ChaosDeployment[] = [];
  private readonly retired: ChaosDeployment[] = [];
  private named = 0;

  constructor(private readonly shared: Omit<DeploymentOptions, "name">) {}

  /** How many deployments ran, retired ones included. */
  get launched(): number {
    return this.named;
  }

  async launch(): Promise<void> {
    const name = `deployment-${++this.named}`;
    const deployment = await ChaosDeployment.create({ name, ...this.shared });
    deployment.start();
    this.alive.push(deployment);
  }

  retire(deployment: ChaosDeployment): void {
    this.alive.splice(this.alive.indexOf(deployment), 1);
    this.retired.push(deployment);
  }

  /** The running deployment that began the latest term, if it is still running. */
  leader(): ChaosDeployment | undefined {
    const latest = this.shared.observatory.terms.at(-1)?.deployment;
    return this.alive.find((deployment) => deployment.name === latest);
  }

  async shutdown(): Promise<void> {
    for (const deployment of this.alive) deployment.kill();
    await Promise.all([...this.alive, ...this.retired].map((deployment) => deployment.shutdown()));
  }
}

interface SoakWorld {
  nats: RunningNats;
  fleet: Fleet;
  observatory: Observatory;
  contenders: Contenders;
  /** The fleet's starting size. */
  nodes: number;
}

/** The seeded fault schedule: a fault every FAULT_EVERY_MS, each lease-write delay lifted before the next. */
class FaultInjector {
  readonly injected: Record<FaultKind, number> = { "kill-leader": 0, release: 0, "delay-writes": 0, "restart-nats": 0, "add-nodes": 0 };
  private delayed: ChaosDeployment | undefined;

  constructor(private readonly world: SoakWorld) {}

  /** Injects faults for `durationMs`, then lifts the last write delay. */
  async injectFor(durationMs: number, random: () => number): Promise<void> {
    const { fleet, observatory } = this.world;
    const deadline = performance.now() + durationMs;
    while (performance.now() < deadline) {
      await sleep(FAULT_EVERY_MS);
      this.delayed?.delayStoreWrites(0);
      this.delayed = undefined;
      const kind = FAULTS[Math.floor(random() * FAULTS.length)] as FaultKind;
      if (!(await this.inject(kind))) continue;
      this.injected[kind] += 1;
      console.log(`${new Date().toISOString()} ${kind}: ${fleet.identities.length - unprovisioned(fleet).length}/${fleet.identities.length} provisioned, ${observatory.terms.length} terms, ${observatory.crossTermExecutions(fleet).length} executions across terms at the nodes`);
    }
    this.delayed?.delayStoreWrites(0);
  }

  /** False when the fault needs a leader and none is running. */
  private async inject(kind: FaultKind): Promise<boolean> {
    const { contenders, nats, fleet, nodes } = this.world;
    const current = contenders.leader();
    switch (kind) {
      case "kill-leader":
        if (!current) return false;
        current.kill();
        contenders.retire(current);
        await contenders.launch();
        break;
      case "release":
        if (!current) return false;
        contenders.retire(current);
        await current.stopAndRelease();
        await contenders.launch();
        break;
      case "delay-writes":
        if (!current) return false;
        current.delayStoreWrites((LEASE.leaseDurationMs * 2) / SCALE);
        this.delayed = current;
        break;
      case "restart-nats":
        await nats.restart();
        break;
      case "add-nodes":
        await fleet.addNodes(Math.ceil(nodes / 10));
        break;
    }
    return true;
  }
}

await main();
