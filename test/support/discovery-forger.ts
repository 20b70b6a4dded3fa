/**
 * A hostile client on the provisioning broker that answers every discovery at once, before any
 * node can, with made-up names (what the discovery bounds and the new-name budget defend against).
 */
import { connect, type NatsConnection, type Subscription } from "nats";
import { decodeRequest, encodeReply } from "./choria-node/protocol";

export class DiscoveryForger {
  private forging: Subscription | undefined;

  private constructor(private readonly nc: NatsConnection) {}

  static async connect(natsUrl: string): Promise<DiscoveryForger> {
    return new DiscoveryForger(await connect({ servers: natsUrl }));
  }

  /** `count` replies to each discovery; `fresh`: new names at each discovery, else the same ones. */
  async forge(count: number, options: { fresh?: boolean } = {}): Promise<void> {
    let discovery = 0;
    this.forging = this.nc.subscribe("provisioning.broadcast.agent.discovery", {
      callback: (_error, message) => {
        const request = decodeRequest(message.data);
        const round = options.fresh ? `${discovery++}-` : "";
        for (let index = 0; index < count; index++) {
          const senderId = `forged-${round}${index}.example.net`;
          const reply = encodeReply({ version: request.version, requestId: request.id, senderId, agent: "discovery", payload: new TextEncoder().encode("pong"), timeMs: Date.now() });
          this.nc.publish(request.replyTo, reply);
        }
      },
    });
    await this.nc.flush();
  }

  stop(): void {
    this.forging?.unsubscribe();
    this.forging = undefined;
  }

  async close(): Promise<void> {
    this.stop();
    await this.nc.close();
  }
}
