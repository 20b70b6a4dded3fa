/**
 * The simulated Choria fleet, judged at the node. A node in provisioning mode is on the
 * provisioning broker (discovery finds it, the engine provisions it); a configured one is on the
 * main broker (renewal's reprovision reaches it). Every node enforces the request TTL on its own
 * clock and records every request that reached it: run or expired, with the term its sender sent
 * it under (the wire carries none: the sender's side tags it). What a node ran is the fact the
 * invariants are checked on.
 */
import { X509Certificate } from "node:crypto";
import type { DiscoveryResult, Broker } from "../../../lib/app/use-case-ports";
import { buildLifecycleEvent, encodeLifecycleEvent } from "../../../lib/choria/lifecycle";
import { decodeJwt } from "../../../lib/crypto/jwt";
import { RpcNotSentError, RpcStatusError, RpcTimeoutError, RpcTransportError } from "../../../lib/errors";
import type { ChoriaRpc, RpcCall, RpcReply } from "../../../lib/ports/rpc";
import type { Faults, Paths } from "./faults";
import { SIM_EPOCH_MS, type Container, type VirtualTime } from "./time";

export const LIFECYCLE_COMPONENT = "provision_mode_server";
export type BrokerName = "provisioning" | "main";

/** One request as it reached a node. */
export interface NodeRecord {
  identity: string;
  action: string;
  deployment: string;
  /** The lease term its sender sent it under (-1: none known). */
  term: number;
  /** True time the sender's gate checked the lease for it. */
  gateCheckedAt: number;
  /** True time it left its sender. */
  sentAt: number;
  /** True time it reached the node. */
  at: number;
  outcome: "ran" | "expired";
}

/** A node's configured period: from its restart into service until it left service (or the run ended). */
export interface ServicePeriod {
  identity: string;
  from: number;
  until?: number;
  /** True time its credentials expire. */
  expiresAt: number;
}

interface SimNode {
  identity: string;
  mode: BrokerName;
  skewMs: number;
  pendingNotAfter?: number;
  /** Since when the node waits in provisioning mode. */
  waitingSince: number;
  period?: ServicePeriod;
}

/**
 * The site's lifecycle stream as its durable consumer holds it: startup events, acknowledged by
 * whichever leader's tick took them. A delivered event is not delivered again until its ack wait
 * (or the delay it was handed back with) passes.
 */
export interface StreamEvent {
  seq: number;
  identity: string;
  body: Uint8Array;
  acked: boolean;
  /** True ms before which the consumer does not deliver it again (0: waiting now). */
  deliverableAt: number;
  deliveries: number;
}

export class SimFleet {
  readonly records: NodeRecord[] = [];
  /**
   * The credential each `configure` that reached a node carried, as the issuance ledger names it
   * (lib/engine/issuance.ts): the server JWT's `jti` when there is one, else the certificate's SHA-256
   * fingerprint. Kept beside the records, not in them: the simulated helper signs its certificates
   * afresh (ECDSA), so their fingerprints differ from one replay of a scenario to the next.
   */
  readonly credentials = new WeakMap<NodeRecord, string>();
  readonly periods: ServicePeriod[] = [];
  readonly stream: StreamEvent[] = [];
  private readonly nodes = new Map<string, SimNode>();

  constructor(
    private readonly time: VirtualTime,
    private readonly faults: Faults,
    identities: readonly string[],
    private readonly skewBoundMs: number,
    private readonly token: string,
  ) {
    for (const identity of identities) this.join(identity);
  }

  /** A node boots in provisioning mode and announces itself. */
  join(identity: string): void {
    const skewMs = this.faults.between(-this.skewBoundMs / 2, this.skewBoundMs / 2);
    this.nodes.set(identity, { identity, mode: "provisioning", skewMs, waitingSince: this.time.now });
    this.announce(identity);
  }

  get identities(): string[] {
    return [...this.nodes.keys()];
  }

  modeOf(identity: string): BrokerName {
    return this.node(identity).mode;
  }

  waitingSince(identity: string): number {
    return this.node(identity).waitingSince;
  }

  /** The node restarts on its own: back in the mode it was in, announcing itself when provisioning. */
  restart(identity: string): void {
    this.faults.hit("node-restart");
    if (this.node(identity).mode === "provisioning") this.announce(identity);
  }

  /** Discovery on the provisioning broker, as one deployment sees it. */
  broker(container: Container, deployment: string, paths: Paths): Pick<Broker, "discover" | "publishStartup" | "prepareRpc"> {
    return {
      discover: () =>
        container.send(async () => {
          await this.time.sleep(2_000);
          if (paths.brokerCutUntil > this.time.now) throw new RpcTransportError(deployment, "discovery", "simulated: the broker path is cut");
          const identities = [...this.nodes.values()].filter((node) => node.mode === "provisioning").map((node) => node.identity);
          for (let index = identities.length - 1; index > 0; index--) {
            const other = Math.floor(this.faults.random() * (index + 1));
            [identities[index], identities[other]] = [identities[other]!, identities[index]!];
          }
          return { identities, replies: identities.length, skipped: 0, capped: false } satisfies DiscoveryResult;
        }),
      publishStartup: async () => undefined,
      prepareRpc: async () => undefined,
    };
  }

  /** Direct RPC from one container on `broker`, tagged with the term `termOf` says it is sent under. */
  rpc(container: Container, deployment: string, broker: BrokerName, ttlSeconds: number, paths: Paths, termOf: () => number): ChoriaRpc {
    return {
      call: (call) =>
        container.send(async () => {
          const rpc = `${call.agent}#${call.action}`;
          if ((call.sendWithinMs ?? call.timeoutMs) <= 0) throw new RpcNotSentError(call.identity, rpc, "the send-by instant has passed");
          const gateCheckedAt = this.time.now - (call.gateCheckedMsAgo ?? 0);
          const request = { call, deployment, term: termOf(), stampedAt: container.clock.now() - (call.gateCheckedMsAgo ?? 0), ttlMs: ttlSeconds * 1_000, gateCheckedAt, sentAt: this.time.now };
          const reply = new Promise<RpcReply | undefined>((resolve) => {
            if (paths.brokerCutUntil > this.time.now) return;
            const held = this.faults.strikes("rpc-request-held", this.faults.rates.rpcRequestHeld) ? this.faults.between(5_000, ttlSeconds * 1_000 + 30_000) : this.faults.between(1, 30);
            this.time.after(held, () => {
              const answer = this.receive(request, broker);
              if (answer && !this.faults.strikes("rpc-reply-lost", this.faults.rates.rpcReplyLost)) this.time.after(this.faults.between(1, 30), () => resolve(answer));
            });
          });
          const answer = await Promise.race([reply, this.time.sleep(call.timeoutMs).then(() => undefined)]);
          if (!answer) throw new RpcTimeoutError(call.identity, rpc, `no reply within ${call.timeoutMs} ms`);
          if (answer.statuscode !== 0) throw new RpcStatusError(call.identity, rpc, answer.sender, answer.statuscode, answer.statusmsg);
          return answer;
        }),
    };
  }

  private receive(
    request: { call: RpcCall; deployment: string; term: number; stampedAt: number; ttlMs: number; gateCheckedAt: number; sentAt: number },
    broker: BrokerName,
  ): RpcReply | undefined {
    const { call } = request;
    const node = this.nodes.get(call.identity);
    if (!node || node.mode !== broker) return undefined;
    const record: NodeRecord = {
      ...{ identity: node.identity, action: `${call.agent}#${call.action}`, deployment: request.deployment, term: request.term },
      ...{ gateCheckedAt: request.gateCheckedAt, sentAt: request.sentAt, at: this.time.now, outcome: "ran" as const },
    };
    if (SIM_EPOCH_MS + this.time.now + node.skewMs > request.stampedAt + request.ttlMs) {
      this.records.push({ ...record, outcome: "expired" });
      return undefined;
    }
    this.records.push(record);
    const credentialId = call.agent === "choria_provision" && call.action === "configure" ? credentialIdOf(call.data) : undefined;
    if (credentialId !== undefined) this.credentials.set(record, credentialId);
    const ok = (data: Record<string, unknown> = {}): RpcReply => ({ sender: node.identity, statuscode: 0, statusmsg: "OK", data });
    const refuse = (statusmsg: string): RpcReply => ({ sender: node.identity, statuscode: 1, statusmsg, data: {} });
    if (call.agent === "rpcutil") return ok({ version: "0.29.4", agents: ["choria_provision", "rpcutil"] });
    if (call.data.token !== this.token) return refuse("Incorrect provision token supplied");
    switch (call.action) {
      case "configure":
        node.pendingNotAfter = new Date(new X509Certificate(String(call.data.certificate)).validTo).getTime() - SIM_EPOCH_MS;
        return ok({ message: "configuration written" });
      case "restart":
        this.time.after(this.faults.between(1_000, 2_000), () => this.restartIntoService(node));
        return ok({ message: "restarting" });
      case "reprovision":
        this.time.after(this.faults.between(1_000, 2_000), () => this.leaveService(node));
        return ok({ message: "reprovisioning" });
      default:
        return refuse(`unknown action ${call.action}`);
    }
  }

  private restartIntoService(node: SimNode): void {
    if (node.mode !== "provisioning") return;
    if (node.pendingNotAfter === undefined) {
      this.announce(node.identity);
      return;
    }
    node.mode = "main";
    node.period = { identity: node.identity, from: this.time.now, expiresAt: node.pendingNotAfter };
    node.pendingNotAfter = undefined;
    this.periods.push(node.period);
  }

  private leaveService(node: SimNode): void {
    if (node.mode !== "main") return;
    node.mode = "provisioning";
    node.waitingSince = this.time.now;
    if (node.period) node.period.until = this.time.now;
    node.period = undefined;
    this.announce(node.identity);
  }

  private announce(identity: string): void {
    const node = this.node(identity);
    const event = buildLifecycleEvent({ type: "startup", identity, component: LIFECYCLE_COMPONENT, timestampMs: SIM_EPOCH_MS + this.time.now + node.skewMs, id: `${identity}-${this.stream.length}` });
    this.stream.push({ seq: this.stream.length, identity, body: encodeLifecycleEvent(event, "choria"), acked: false, deliverableAt: 0, deliveries: 0 });
  }

  private node(identity: string): SimNode {
    const node = this.nodes.get(identity);
    if (!node) throw new Error(`no simulated node ${identity}`);
    return node;
  }
}

/** The ledger's id of the credential a `configure` carries: its server JWT's `jti`, else its certificate's SHA-256 fingerprint. */
function credentialIdOf(data: Record<string, unknown>): string | undefined {
  const jwt = typeof data.server_jwt === "string" ? data.server_jwt : "";
  const jti = jwt === "" ? undefined : decodeJwt(jwt).claims.jti;
  if (typeof jti === "string") return jti;
  const pem = typeof data.certificate === "string" ? data.certificate : "";
  return pem === "" ? undefined : new X509Certificate(pem).fingerprint256;
}
