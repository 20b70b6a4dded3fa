/** The Choria RPC ports: one direct request to one node, and broadcast discovery. */
export interface RpcCall {
  identity: string;
  agent: string;
  action: string;
  data: Record<string, unknown>;
  /** Per-attempt timeout: discovery timeout (2 s) + the agent's DDL timeout. */
  timeoutMs: number;
  /**
   * The send-by instant, as ms from this call: after it the request must not leave the process;
   * default `timeoutMs`. Set from the gate's AttemptWindow. Relative, so the client's clock and the
   * gate's need not be the same object.
   */
  sendWithinMs?: number;
  /** The envelope `time` is the gate check's: this many ms before this call (default 0, the send). */
  gateCheckedMsAgo?: number;
  /** When given, replies to this request after the one that decided it are handed on (LaterReplies). */
  laterReplies?: LaterReplies;
}

/**
 * The replies from the target to one request that come after the reply that decided the call:
 * a node answers a request once, so another one whose bytes differ from every reply before it is
 * a second machine answering as the same identity (docs/audit.md); byte-identical network copies
 * are not handed on. The client keeps listening after a successful call, without delaying it,
 * until `until` settles or the request's TTL runs out.
 */
export interface LaterReplies {
  /** Each later reply from the target to this request whose statuscode is 0, with a fingerprint of its bytes. */
  onReply(reply: RpcReply, fingerprint: string): void;
  until: Promise<void>;
}

export interface RpcReply<T = Record<string, unknown>> {
  sender: string;
  statuscode: number;
  statusmsg: string;
  data: T;
}

/**
 * One direct Choria RPC attempt to one node. Resolves only with exactly one reply from the target
 * whose statuscode is 0; otherwise throws RpcTimeoutError, RpcStatusError or RpcProtocolError.
 * Retries, backoff and the pause gate belong to the caller.
 */
export interface ChoriaRpc {
  call(call: RpcCall): Promise<RpcReply>;
}

/** Broadcast discovery of nodes in provisioning mode (agent filter `choria_provision`). */
export interface NodeDiscoverer {
  discover(): Promise<string[]>;
}
