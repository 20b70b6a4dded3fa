/** One host's run through the sequence (Go `host.Host`): what every step reads, and the planned RPC with retries each step makes. */
import { RpcProtocolError, RpcStatusError } from "../errors";
import type { Clock } from "../ports/clock";
import type { HostWork } from "../ports/host-work";
import type { LogAttributes, Logger } from "../ports/logger";
import type { LaterReplies, RpcReply } from "../ports/rpc";
import { AGENT_TIMEOUT_MS, RPC_PLAN, rpcLabel, type PlannedRpc } from "./plan";
import { rpcWithRetries, type RetryContext } from "./retry";
import type { EngineDeps, EngineSettings } from "./settings";

export interface HostRun {
  readonly identity: string;
  readonly work: HostWork;
  readonly deps: EngineDeps;
  readonly settings: EngineSettings;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The attributes every log line of this host carries. */
  readonly log: LogAttributes;
  readonly retry: RetryContext;
}

/**
 * One planned RPC with retries. `handle` runs per attempt and may throw to reject the reply;
 * `onStatus`, when given, turns an error status from the node into a successful attempt;
 * `laterReplies`, when given, hears the replies after the deciding one (lib/engine/collision.ts).
 */
export function callPlanned<T>(
  run: HostRun,
  planned: PlannedRpc,
  data: () => Record<string, unknown>,
  handle: (reply: RpcReply) => T,
  onStatus?: (status: RpcStatusError) => T,
  laterReplies?: LaterReplies,
): Promise<T> {
  const plan = RPC_PLAN[planned];
  return rpcWithRetries({
    ...run.retry,
    identity: run.identity,
    rpc: rpcLabel(plan),
    tries: plan.tries,
    attemptTimeoutMs: plan.timeoutMs,
    call: async (_try, window) => {
      let reply: RpcReply;
      try {
        reply = await run.deps.rpc.call({
          identity: run.identity,
          agent: plan.agent,
          action: plan.action,
          data: data(),
          timeoutMs: plan.timeoutMs,
          // The node may take its agent's whole DDL timeout to act: the request must reach it early enough for that to end inside the window.
          sendWithinMs: window.endsBy - AGENT_TIMEOUT_MS[plan.agent] - run.clock.monotonic(),
          gateCheckedMsAgo: Math.max(0, run.clock.now() - window.stampedAt),
          ...(laterReplies ? { laterReplies } : {}),
        });
      } catch (error) {
        if (onStatus && error instanceof RpcStatusError) return onStatus(error);
        throw error;
      }
      return handle(reply);
    },
  });
}

export function textField(run: HostRun, reply: RpcReply, planned: PlannedRpc, name: string): string {
  const value = reply.data[name];
  if (value === undefined || value === null) return "";
  if (typeof value !== "string") {
    throw new RpcProtocolError(run.identity, rpcLabel(RPC_PLAN[planned]), `reply field ${name} is not a string`);
  }
  return value;
}
