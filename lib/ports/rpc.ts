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
