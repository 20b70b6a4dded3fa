/**
 * Faults a simulated node can be told to show, at fleet start or at runtime. Each names the
 * misbehaviour of a real node (or of something between it and the provisioner) that the
 * provisioner must survive with a named error rather than a hang or a wrong provisioning.
 */

/**
 * Which RPCs a fault applies to: `true` = every request the node answers (including discovery),
 * or a list of `action` or `agent#action` names (`"jwt"`, `"rpcutil#inventory"`, `"discovery#ping"`).
 */
export type RpcSelector = true | readonly string[];

export type MalformedLayer = "transport" | "secure" | "reply" | "mcorpc";

/** How the node's provisioning JWT (returned by the `jwt` action) is broken. */
export type ProvisioningJwtFault =
  /** exp in the past. */
  | "expired"
  /** Signed by a key other than the fleet's signer. */
  | "foreign"
  /** HMAC-signed, an algorithm Choria never accepts. */
  | "hs256"
  /** Not a JWT at all. */
  | "garbage"
  /** Verifies, but is not a provisioning token (no purpose / sub). */
  | "not-provisioning"
  /** The node has no provisioning.jwt file: `Provisioning JWT file does not exist`. */
  | "missing-file";

export interface NodeFaults {
  /** Hold each selected reply back this long (ms); past the agent timeout no reply is sent. */
  delay?: { ms: number; on?: RpcSelector };
  /** Never reply to the selected requests (they are still processed, as a lost reply would be). */
  silent?: RpcSelector;
  /** Replace the selected actions' outcome with this status (key: action or agent#action). */
  status?: Record<string, { statuscode: number; statusmsg: string }>;
  /** Put another identity into the transport header and/or the reply envelope. */
  wrongSender?: { transport?: string; envelope?: string; on?: RpcSelector };
  /** Answer with a request id other than the one asked. */
  foreignRequestId?: RpcSelector;
  /** Send a secure reply whose hash does not match its content. */
  badHash?: RpcSelector;
  /** Break the reply at one layer of the onion. */
  malformed?: { layer: MalformedLayer; on?: RpcSelector };
  /** Pad the reply data so the whole message is at least this many bytes. */
  oversized?: { bytes: number; on?: RpcSelector };
  /** Publish every selected reply twice. */
  duplicate?: RpcSelector;
  /**
   * Go silent once the named action (or agent#action) has been handled: the reply to that action
   * is still sent unless `beforeReply`. With `restartAfterMs` the node comes back later in
   * provisioning mode with the files it had at fleet start (the crash lost the rest).
   */
  crash?: { after: string; beforeReply?: boolean; restartAfterMs?: number };
  provisioningJwt?: ProvisioningJwtFault;
  /** gen25519 signs something other than the nonce. */
  badNonceSignature?: boolean;
  /** gencsr produces a CSR with this CN and/or these DNS SANs instead of the requested ones. */
  csr?: { commonName?: string; dnsNames?: string[] };
  /** rpcutil#inventory reports this version instead of the node's. */
  inventoryVersion?: string;
  /** release_update fails; `rollbackFailed` picks the "server in broken state" text. */
  updateFailure?: { message: string; rollbackFailed?: boolean };
}

/** Does `selector` cover the request `agent#action`? An absent selector covers everything. */
export function selects(selector: RpcSelector | undefined, agent: string, action: string): boolean {
  if (selector === undefined || selector === true) return true;
  return selector.includes(action) || selector.includes(`${agent}#${action}`);
}

/** Like `selects`, but an absent selector covers nothing (for faults given only as a selector). */
export function selectsIfSet(selector: RpcSelector | undefined, agent: string, action: string): boolean {
  return selector !== undefined && selects(selector, agent, action);
}
