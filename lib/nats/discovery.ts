/**
 * Broadcast discovery of nodes in provisioning mode (docs/protocol.md §5): a `discovery` ping to
 * every node with the `choria_provision` agent, names read from each reply's transport sender
 * header, collected in a sliding window (cap `discovery_timeout`, 300 ms after the latest reply).
 *
 * Go's discoverer returns duplicates and leaves deduplication to the host table; this one returns
 * each identity once, in the order first seen, which the registry would produce anyway. Names that
 * could not safely become a NATS subject token are skipped like undecodable replies.
 *
 * An identity that answers twice with different bytes is reported as a collision (docs/audit.md):
 * two machines answer as it. Byte-identical copies are one delivery counted twice by the network
 * (a node answers a request once), so they are not; nor is a rebuilt node, which answers alone.
 * Replies carry the envelope time, in ns for protocol v2 but in seconds for v1, so two v1 twins
 * answering in the same second can look like one: the engine's check on the `jwt` reply
 * (lib/engine/provision.ts) catches those.
 */
import type { NatsConnection, Subscription } from "nats";
import { ProvisionerError } from "../errors";
import type { DiscoveredCollision, DiscoveryResult } from "../app/use-case-ports";
import type { NodeDiscoverer } from "../ports/rpc";
import { agentFilter } from "../choria/filter";
import { identityProblem } from "../choria/identity";
import { fingerprint } from "../choria/envelope";
import { broadcastSubject, DISCOVERY_PING, encodeRequest, readTransportSender, replySubject } from "../choria/protocol";
import { type ChoriaClientSettings, newRequestId, resolveClientSettings } from "./rpc-client";
import { realScheduler, SlidingWindow, type Scheduler } from "./sliding-window";

const DEFAULT_DISCOVERY_TIMEOUT_MS = 2_000;
const DISCOVERY_IDLE_MS = 300;
/** Distinct replies kept per identity as a collision's evidence. */
const REPLIES_KEPT = 4;

/** Discovery could not be sent (connection closed, publish refused). Empty results are not errors. */
class DiscoveryError extends ProvisionerError {}
export interface DiscoverySettings extends ChoriaClientSettings {
  /** The `discovery_timeout` setting: window cap in ms, default 2000. */
  discoveryTimeoutMs?: number;
  /** Quiet time after the latest reply that ends discovery; default 300 ms. */
  idleMs?: number;
  /**
   * The memory bound: once this many identities are collected the window closes and nothing more
   * is read, so forged replies cannot produce unbounded work. Which of them are admitted (at most
   * `discovery_max_nodes`) is the caller's choice. Default unbounded.
   */
  maxIdentities?: number;
  scheduler?: Scheduler;
}

export class BroadcastDiscoverer implements NodeDiscoverer {
  private readonly client: ReturnType<typeof resolveClientSettings>;
  private readonly capMs: number;
  private readonly idleMs: number;
  private readonly scheduler: Scheduler;
  private readonly maxIdentities: number;

  constructor(
    private readonly nc: NatsConnection,
    settings: DiscoverySettings,
  ) {
    this.client = resolveClientSettings(settings);
    this.capMs = settings.discoveryTimeoutMs ?? DEFAULT_DISCOVERY_TIMEOUT_MS;
    this.idleMs = settings.idleMs ?? DISCOVERY_IDLE_MS;
    this.scheduler = settings.scheduler ?? realScheduler;
    this.maxIdentities = settings.maxIdentities ?? Number.POSITIVE_INFINITY;
  }

  async discover(): Promise<string[]> {
    return (await this.discoverWithStats()).identities;
  }

  async discoverWithStats(): Promise<DiscoveryResult> {
    const { collective, senderId, callerId, protocolVersion, signer, ttl, clock, maxReplyBytes, logger } = this.client;
    const requestId = newRequestId(protocolVersion, clock);
    const replyTo = replySubject(collective, callerId, requestId);
    const seen = new Set<string>();
    /** Per identity, the fingerprints of its distinct replies and when each came. */
    const answers = new Map<string, Map<string, number>>();
    let replies = 0;
    let skipped = 0;
    let capped = false;

    const window = new SlidingWindow(this.scheduler, this.capMs, this.idleMs);
    let subscription: Subscription | undefined;
    try {
      subscription = this.nc.subscribe(replyTo, {
        callback: (error, message) => {
          if (error || window.isClosed) return;
          replies += 1;
          window.touch();
          let sender: string;
          try {
            sender = readTransportSender(message.data, maxReplyBytes);
          } catch {
            skipped += 1;
            return;
          }
          const problem = identityProblem(sender);
          if (problem === undefined) {
            noteAnswer(answers, sender, message.data, clock.now());
            seen.add(sender);
            if (seen.size >= this.maxIdentities) {
              capped = true;
              window.close();
            }
            return;
          }
          skipped += 1;
          // A name that would widen a subject is someone probing us: leave a trace, not just a count.
          logger.warn("ignored a discovery reply whose sender cannot be a node identity", { sender: sender.slice(0, 100), reason: problem });
        },
      });
      await this.nc.flush();
      this.nc.publish(
        broadcastSubject(collective, "discovery"),
        encodeRequest({
          id: requestId,
          senderId,
          callerId,
          collective,
          agent: "discovery",
          ttl,
          timeMs: clock.now(),
          filter: agentFilter("choria_provision"),
          payload: DISCOVERY_PING,
          replyTo,
          signer,
        }),
      );
    } catch (error) {
      window.close();
      subscription?.unsubscribe();
      throw new DiscoveryError("could not publish the discovery request", { cause: error });
    }

    await window.done;
    subscription.unsubscribe();
    return { identities: [...seen], replies, skipped, capped, collisions: collisionsOf(answers) };
  }
}

function noteAnswer(answers: Map<string, Map<string, number>>, sender: string, bytes: Uint8Array, now: number): void {
  let distinct = answers.get(sender);
  if (!distinct) answers.set(sender, (distinct = new Map()));
  if (distinct.size >= REPLIES_KEPT) return;
  const reply = fingerprint(bytes);
  if (!distinct.has(reply)) distinct.set(reply, now);
}

function collisionsOf(answers: Map<string, Map<string, number>>): DiscoveredCollision[] {
  const collisions: DiscoveredCollision[] = [];
  for (const [identity, distinct] of answers) {
    if (distinct.size > 1) collisions.push({ identity, replies: [...distinct].map(([reply, receivedAt]) => ({ reply, receivedAt })) });
  }
  return collisions;
}
