/**
 * Where one host's time goes in ours' emulated pipeline, from timestamps taken where each step
 * lands: the host-work message (admission), SQS's SentTimestamp (queued), the emulated event
 * source (batch handed to an invocation, invocation returned), the engine's log lines (provisioning
 * began: lease round and claim done; configure sent: helper done) and the simulated node's own
 * request record (inventory answered, restart acknowledged). Pure, so bench/peer.ts and the tests
 * share it.
 */
import { percentile } from "./measure";

/** Epoch ms per host; a stamp is missing when that step was not seen. */
export interface HostStamps {
  admittedAt?: number;
  sentAt?: number;
  invokedAt?: number;
  provisioningAt?: number;
  inventoryAt?: number;
  configuringAt?: number;
  restartAt?: number;
  returnedAt?: number;
}

export const STAGES = [
  { name: "admission -> queued", from: "admittedAt", to: "sentAt", what: "registry write of the chunk, then its SendMessageBatch" },
  { name: "in the queue", from: "sentAt", to: "invokedAt", what: "SQS poll cadence, batch fill, a poller free (its previous batch returned), visibility after a retry" },
  { name: "invocation -> provisioning", from: "invokedAt", to: "provisioningAt", what: "lease round of the invocation, the claim write, a worker free in the batch" },
  { name: "node RPCs before the helper", from: "provisioningAt", to: "inventoryAt", what: "jwt, gen25519, inventory: round trips to the node" },
  { name: "helper", from: "inventoryAt", to: "configuringAt", what: "the helper process (launch, run, reply)" },
  { name: "configure + restart", from: "configuringAt", to: "restartAt", what: "configure and restart RPCs at the node" },
  { name: "batch tail", from: "restartAt", to: "returnedAt", what: "the provisioned write, then waiting for the batch's slowest host before the poller takes more" },
  { name: "admission -> restart", from: "admittedAt", to: "restartAt", what: "the whole" },
] as const satisfies ReadonlyArray<{ name: string; from: keyof HostStamps; to: keyof HostStamps; what: string }>;

export interface StageFigure {
  name: string;
  what: string;
  p50?: number;
  p99?: number;
  samples: number;
}

export interface OperationFigure {
  operation: string;
  per_host: number;
  p50_ms?: number;
  p99_ms?: number;
}

export interface StageBreakdown {
  hosts: number;
  stages: StageFigure[];
  /** DynamoDB requests per restarted host, with their round-trip times (request handed over to the end of its response). */
  dynamodb: OperationFigure[];
}

export function breakdown(hosts: ReadonlyMap<string, HostStamps>, restarted: number, dynamoDbReplies: ReadonlyMap<string, readonly number[]>): StageBreakdown {
  const stages = STAGES.map(({ name, from, to, what }) => {
    const spans: number[] = [];
    for (const stamps of hosts.values()) {
      const start = stamps[from];
      const end = stamps[to];
      if (start !== undefined && end !== undefined) spans.push(Math.max(0, end - start));
    }
    spans.sort((a, b) => a - b);
    return { name, what, p50: percentile(spans, 50), p99: percentile(spans, 99), samples: spans.length };
  });
  const dynamodb = [...dynamoDbReplies].map(([operation, ms]) => {
    const sorted = [...ms].sort((a, b) => a - b);
    return { operation, per_host: restarted > 0 ? Math.round((sorted.length / restarted) * 100) / 100 : 0, p50_ms: percentile(sorted, 50), p99_ms: percentile(sorted, 99) };
  });
  return { hosts: hosts.size, stages, dynamodb };
}

export function stagesTable(figures: StageBreakdown): string[] {
  const lines = ["| stage | p50 ms | p99 ms | hosts | what it is |", "|---|---|---|---|---|"];
  for (const stage of figures.stages) lines.push(`| ${stage.name} | ${stage.p50 ?? "-"} | ${stage.p99 ?? "-"} | ${stage.samples} | ${stage.what} |`);
  lines.push("", "| DynamoDB operation | per host | p50 ms | p99 ms |", "|---|---|---|---|");
  for (const op of figures.dynamodb) lines.push(`| ${op.operation} | ${op.per_host} | ${op.p50_ms !== undefined ? Math.round(op.p50_ms) : "-"} | ${op.p99_ms !== undefined ? Math.round(op.p99_ms) : "-"} |`);
  return lines;
}
