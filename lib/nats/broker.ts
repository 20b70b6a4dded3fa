/**
 * The broker adapter behind the use cases' `Broker` port: one shared connection per container, a
 * discoverer and an RPC client bound to it, and the provisioner's startup event. The lifecycle
 * event source (lifecycle-event-source.ts) reads events on the same connection.
 */
import type { NatsConnection } from "nats";
import type { Broker, DiscoveryResult } from "../app/use-case-ports";
import type { ChoriaRpc } from "../ports/rpc";
import type { Clock } from "../ports/clock";
import { BrokerConnectionError } from "../errors";
import { publishStartupEvent, type SharedBrokerConnection } from "./connection";
import { BroadcastDiscoverer } from "./discovery";
import { NatsChoriaRpc, type ChoriaClientSettings } from "./rpc-client";

/** The version announced in the provisioner's startup event. */
const PROVISIONER_VERSION = "0.1.0";

export interface ChoriaBrokerSettings {
  /** The provisioner's identity, announced in its startup event. */
  identity: string;
  discoveryTimeoutMs: number;
  /** `discovery_max_nodes`: the names one discovery admits; collection reads up to `collectionBound` of it. */
  discoveryMaxNodes: number;
}

/**
 * Names one discovery reads before it stops: a multiple of the cap, at least 50,000 (a few MB of
 * names), so a flood of forged replies arriving first does not hide the real nodes' replies from
 * the known-names-first selection that then picks at most the cap.
 */
function collectionBound(discoveryMaxNodes: number): number {
  return Math.max(4 * discoveryMaxNodes, 50_000);
}

export class ChoriaBroker implements Broker {
  private bound: { nc: NatsConnection; rpc: NatsChoriaRpc } | undefined;
  /** Delegates to the client of the connection prepared last; the engine holds this one object. */
  readonly rpc: ChoriaRpc = {
    call: (call) => {
      if (!this.bound) throw new BrokerConnectionError("the broker connection was not prepared before provisioning");
      return this.bound.rpc.call(call);
    },
  };

  constructor(
    private readonly shared: SharedBrokerConnection,
    private readonly client: ChoriaClientSettings,
    private readonly settings: ChoriaBrokerSettings,
    private readonly clock: Clock,
  ) {}

  /** A connection that answered a PING just now (the lifecycle bridge reads on it). */
  connection(): Promise<NatsConnection> {
    return this.shared.get();
  }

  async discover(): Promise<DiscoveryResult> {
    const nc = await this.shared.get();
    return new BroadcastDiscoverer(nc, {
      ...this.client,
      discoveryTimeoutMs: this.settings.discoveryTimeoutMs,
      maxIdentities: collectionBound(this.settings.discoveryMaxNodes),
    }).discoverWithStats();
  }

  async closeIfPublishPending(): Promise<boolean> {
    if (!this.bound?.rpc.hasUnconfirmedPublishes()) return false;
    await this.close();
    return true;
  }

  async prepareRpc(): Promise<void> {
    const nc = await this.shared.get();
    if (this.bound?.nc !== nc) this.bound = { nc, rpc: new NatsChoriaRpc(nc, this.client) };
  }

  async publishStartup(): Promise<void> {
    await publishStartupEvent(await this.shared.get(), { identity: this.settings.identity, version: PROVISIONER_VERSION, clock: this.clock });
  }

  async close(): Promise<void> {
    this.bound = undefined;
    await this.shared.close();
  }
}
