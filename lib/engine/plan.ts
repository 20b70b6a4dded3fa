/**
 * The Go provisioner's per-RPC plan (docs/protocol.md §7): how often each call is tried and how long one
 * attempt may wait. Kept as data so the engine, tests and docs read the same numbers.
 */

/** Discovery timeout the Go client adds to every agent's DDL timeout. */
export const DISCOVERY_TIMEOUT_MS = 2_000;

/** DDL timeouts of the agents the provisioner calls. */
export const AGENT_TIMEOUT_MS = {
  choria_provision: 20_000,
  rpcutil: 2_000,
} as const;

type PlannedAgent = keyof typeof AGENT_TIMEOUT_MS;

export interface RpcPlan {
  agent: PlannedAgent;
  action: string;
  /** Attempts before giving up (Go `rpcWrapper` tries). */
  tries: number;
  /** One attempt's timeout: discovery timeout + the agent's DDL timeout. */
  timeoutMs: number;
}

function plan(agent: PlannedAgent, action: string, tries: number): RpcPlan {
  return { agent, action, tries, timeoutMs: DISCOVERY_TIMEOUT_MS + AGENT_TIMEOUT_MS[agent] };
}

export const RPC_PLAN = {
  jwt: plan("choria_provision", "jwt", 3),
  gen25519: plan("choria_provision", "gen25519", 5),
  inventory: plan("rpcutil", "inventory", 5),
  gencsr: plan("choria_provision", "gencsr", 1),
  shutdown: plan("choria_provision", "shutdown", 3),
  releaseUpdate: plan("choria_provision", "release_update", 3),
  configure: plan("choria_provision", "configure", 5),
  restart: plan("choria_provision", "restart", 3),
} as const satisfies Record<string, RpcPlan>;

export type PlannedRpc = keyof typeof RPC_PLAN;

/** The `rpc` metric label and log name of a planned call, e.g. `choria_provision#jwt`. */
export function rpcLabel(rpc: RpcPlan): string {
  return `${rpc.agent}#${rpc.action}`;
}

/** The helper may run this long (Go `runHelper`); the gate and the deadline must cover it. */
export const HELPER_TIMEOUT_MS = 10_000;

/** Restart splay the Go provisioner asks for: the node restarts after exactly 2 s. */
export const RESTART_SPLAY_SECONDS = 1;
