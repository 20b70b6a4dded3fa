/**
 * Direct Choria RPC over NATS (docs/protocol.md §1, §4, §12.4): one request to
 * `provisioning.node.<identity>`, one reply expected on `provisioning.reply.<md5(callerid)>.<id>`.
 *
 * Reply selection, like the Go client's: the first reply whose envelopes decode, whose transport
 * and envelope sender are both the target and whose request id is ours decides the call; the wait
 * ends right there, so a second reply from the same identity (a duplicate identity in the fleet)
 * is not waited for. A call given `laterReplies` keeps its subscription after a successful reply,
 * without delaying the call, and hands on every later reply that passes the same checks and whose
 * bytes differ from every reply before it (a byte-identical copy is one delivery), until the caller
 * stops it or the request's TTL ends: the engine takes one as a second machine answering as the
 * identity (lib/engine/collision.ts) and quarantines it (docs/audit.md).
 * Replies that fail any of those checks
 * are ignored, as Go ignores them, so a stray or hostile publisher on the reply subject cannot end
 * the call early; when no deciding reply arrives in time, the first ignored one is reported as an
 * RpcProtocolError instead of a bare timeout.
 *
 * Send-by discipline (docs/lease.md): each attempt has a send-by instant (from the pause gate's
 * window). The pre-publish flush is bounded by it, and right before `nc.publish`, synchronously,
 * the attempt must be unsettled (not timed out) and the send-by instant not passed; otherwise
 * nothing is published. The envelope `time` is the gate check's, not the send's, so a node judges
 * the request's age from the moment the lease vouched for it. Publishes the broker has not yet
 * confirmed (a PING/PONG after them) are counted: an invocation that ends with one pending closes
 * the connection rather than leave it buffered across a Lambda freeze.
 *
 * Nothing here logs request or reply data: choria_provision requests carry the provisioning token.
 */
import type { NatsConnection, Subscription } from "nats";
import { InvalidInputError, RpcError, RpcNotSentError, RpcProtocolError, RpcStatusError, RpcTimeoutError, RpcTransportError } from "../errors";
import type { ChoriaRpc, LaterReplies, RpcCall, RpcReply } from "../ports/rpc";
import { type Clock, systemClock } from "../ports/clock";
import { type Logger, silentLogger } from "../ports/logger";
import { ksuid, uuidHex } from "../crypto/ids";
import { agentFilter } from "../choria/filter";
import { fingerprint } from "../choria/envelope";
import { assertValidIdentity } from "../choria/identity";
import { decodeReply, DEFAULT_MAX_MESSAGE_BYTES, encodeRequest, type IncomingReply, nodeSubject, replySubject, type RequestSigner } from "../choria/protocol";
import type { ProtocolVersion } from "../choria/envelope";

const PROVISIONING_COLLECTIVE = "provisioning";
/**
 * The shortest TTL v1 servers accept (their request schema's minimum); v2 allows 1 s. Nodes run a
 * request only if `now - ttl < time < now + ttl` on their own clock, so the TTL bounds how long
 * after its gate check a request delayed in the network can still run (the lease's delivery horizon).
 */
const DEFAULT_TTL_SECONDS = 30;
/** Replies kept that came after the deciding one before the call read it; more are a flood, not evidence. */
const EARLY_REPLIES_KEPT = 8;

export interface ChoriaClientSettings {
  /** Default `provisioning`. */
  collective?: string;
  /** The provisioner's identity: envelope sender and transport sender header. */
  senderId: string;
  /** `choria=<name>`; constant across invocations because nodes lock on `<senderId>.<callerId>`. */
  callerId: string;
  protocolVersion: ProtocolVersion;
  signer: RequestSigner;
  /** Request TTL in seconds; default 30 (v1 servers drop anything below 30; v2 accepts from 1). */
  ttl?: number;
  clock?: Clock;
  /** Replies larger than this are rejected undecoded; default 1 MiB (NATS max_payload). */
  maxReplyBytes?: number;
  /** Receives one warning per ignored reply: sender and reason only, never data. */
  logger?: Logger;
  /**
   * Called synchronously right before each request is published, with its id (observability
   * hooks and the chaos suite, which maps request ids to lease terms). Never gets request data.
   */
  onPublish?: (published: { requestId: string; identity: string; agent: string; action: string; stampedAt: number }) => void;
}

interface ResolvedSettings {
  collective: string;
  senderId: string;
  callerId: string;
  protocolVersion: ProtocolVersion;
  signer: RequestSigner;
  ttl: number;
  clock: Clock;
  maxReplyBytes: number;
  logger: Logger;
  onPublish?: ChoriaClientSettings["onPublish"];
}

export function resolveClientSettings(settings: ChoriaClientSettings): ResolvedSettings {
  if (settings.signer.version !== settings.protocolVersion) {
    throw new InvalidInputError(`a protocol v${settings.signer.version} signer cannot sign protocol v${settings.protocolVersion} requests`);
  }
  const ttl = settings.ttl ?? DEFAULT_TTL_SECONDS;
  const minimumTtl = settings.protocolVersion === 1 ? 30 : 1;
  if (!Number.isInteger(ttl) || ttl < minimumTtl) {
    throw new InvalidInputError(`request ttl must be an integer of at least ${minimumTtl} seconds for protocol v${settings.protocolVersion}`);
  }
  if (settings.callerId.length === 0) throw new InvalidInputError("callerId must not be empty");
  return {
    collective: settings.collective ?? PROVISIONING_COLLECTIVE,
    senderId: settings.senderId,
    callerId: settings.callerId,
    protocolVersion: settings.protocolVersion,
    signer: settings.signer,
    ttl,
    clock: settings.clock ?? systemClock,
    maxReplyBytes: settings.maxReplyBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    logger: settings.logger ?? silentLogger,
    onPublish: settings.onPublish,
  };
}

/** v1 ids must be 32 characters (UUIDv4 hex); v2 uses a KSUID like Go. */
export function newRequestId(version: ProtocolVersion, clock: Clock): string {
  return version === 1 ? uuidHex() : ksuid(new Date(clock.now()));
}

/** The mcorpc reply body (docs/protocol.md §4.2). */
interface McorpcReply {
  statuscode: number;
  statusmsg: string;
  data: Record<string, unknown>;
}

function parseMcorpcReply(payload: Uint8Array): McorpcReply | string {
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return "reply body is not JSON";
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "reply body is not a JSON object";
  const { action, statuscode, statusmsg, data } = body as Record<string, unknown>;
  if (typeof action !== "string") return `reply body "action" must be a string`;
  if (typeof statuscode !== "number" || !Number.isInteger(statuscode) || statuscode < 0) {
    return `reply body "statuscode" must be a non-negative integer`;
  }
  if (typeof statusmsg !== "string") return `reply body "statusmsg" must be a string`;
  if (data !== undefined && data !== null && (typeof data !== "object" || Array.isArray(data))) {
    return `reply body "data" must be an object`;
  }
  return { statuscode, statusmsg, data: (data ?? {}) as Record<string, unknown> };
}

interface PendingSend {
  requestId: string;
  replyTo: string;
  /** Monotonic ms on the client's clock. */
  sendBy: number;
  stampedAt: number;
  attempt: { settled: boolean; published: boolean; confirmed: boolean };
}

/** Printable, bounded rendering of a name taken from the network, for error messages. */
function quoted(name: string): string {
  return JSON.stringify(name.slice(0, 200));
}

type Outcome = { reply: IncomingReply } | { timeout: true };

/**
 * One PING for all the flushes asked for in one turn of the event loop. A flush proves that the
 * broker has read everything written before its PING; the PING goes out after the turn in which
 * it was asked for, so it follows every subscription and publish queued before the request, and
 * its PONG proves them all. Calls running at once often ask in the same turn (one socket read of
 * replies resumes several of them), and each used to send two PINGs of its own.
 */
class SharedFlush {
  private next: Promise<void> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  request(): Promise<void> {
    this.next ??= new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        this.next = undefined;
        this.nc.flush().then(resolve, reject);
      });
    });
    return this.next;
  }
}

export class NatsChoriaRpc implements ChoriaRpc {
  private readonly settings: ResolvedSettings;
  /** Publishes not yet confirmed by the broker (no PONG after them yet). */
  private unconfirmed = 0;
  private readonly flushes: SharedFlush;

  constructor(
    private readonly nc: NatsConnection,
    settings: ChoriaClientSettings,
  ) {
    this.settings = resolveClientSettings(settings);
    this.flushes = new SharedFlush(nc);
  }

  /** Whether a request may still be sitting in the connection's buffers, unseen by the broker. */
  hasUnconfirmedPublishes(): boolean {
    return this.unconfirmed > 0;
  }

  async call(call: RpcCall): Promise<RpcReply> {
    assertValidIdentity(call.identity);
    const rpc = `${call.agent}#${call.action}`;
    const { collective, callerId, protocolVersion, clock } = this.settings;
    const sendBy = clock.monotonic() + Math.min(call.sendWithinMs ?? Number.POSITIVE_INFINITY, call.timeoutMs);
    const stampedAt = clock.now() - (call.gateCheckedMsAgo ?? 0);
    const requestId = newRequestId(protocolVersion, clock);
    const replyTo = replySubject(collective, callerId, requestId);

    let firstRejection: string | undefined;
    const reject = (reason: string) => {
      firstRejection ??= reason;
      this.settings.logger.warn("ignored a Choria reply", { identity: call.identity, rpc, reason });
    };

    let subscription: Subscription | undefined;
    let timer: NodeJS.Timeout | undefined;
    let later: ((bytes: Uint8Array) => void) | undefined;
    /** Messages after the deciding one, before the call has read it (one socket read may carry several). */
    const early: Uint8Array[] = [];
    /** Fingerprints of the replies handed on or deciding: a byte-identical copy is one delivery. */
    const seen = new Set<string>();
    let decided = false;
    let listening = false;
    const attempt = { settled: false, published: false, confirmed: false };
    try {
      const outcome = await new Promise<Outcome>((resolve, fail) => {
        timer = setTimeout(() => {
          attempt.settled = true;
          resolve({ timeout: true });
        }, call.timeoutMs);
        subscription = this.nc.subscribe(replyTo, {
          callback: (error, message) => {
            if (later) return error ? undefined : later(message.data);
            if (decided) return error || early.length >= EARLY_REPLIES_KEPT ? undefined : void early.push(message.data);
            if (error) return reject(`subscription error: ${error.message}`);
            const verdict = this.judge(message.data, call.identity, requestId);
            if (typeof verdict === "string") reject(verdict);
            else {
              decided = true;
              if (call.laterReplies) seen.add(fingerprint(message.data));
              resolve({ reply: verdict });
            }
          },
        });
        this.publish(call, { requestId, replyTo, sendBy, stampedAt, attempt }).catch(fail);
      });

      if ("timeout" in outcome) {
        if (attempt.published && !attempt.confirmed) {
          throw new RpcTransportError(call.identity, rpc, `no reply within ${call.timeoutMs} ms, and the broker never confirmed the request`);
        }
        if (firstRejection) throw new RpcProtocolError(call.identity, rpc, `no valid reply within ${call.timeoutMs} ms; ${firstRejection}`);
        throw new RpcTimeoutError(call.identity, rpc, `no reply within ${call.timeoutMs} ms`);
      }

      const body = parseMcorpcReply(outcome.reply.payload);
      if (typeof body === "string") throw new RpcProtocolError(call.identity, rpc, `${body} (sender ${quoted(call.identity)})`);
      if (body.statuscode !== 0) throw new RpcStatusError(call.identity, rpc, call.identity, body.statuscode, body.statusmsg);
      if (call.laterReplies && subscription) {
        later = this.listenLater(subscription, call.laterReplies, call.identity, requestId, seen);
        listening = true;
        for (const bytes of early.splice(0)) later(bytes);
      }
      return { sender: call.identity, statuscode: 0, statusmsg: body.statusmsg, data: body.data };
    } catch (error) {
      if (error instanceof RpcError) throw error;
      throw new RpcTransportError(call.identity, rpc, "could not send the request over NATS", { cause: error });
    } finally {
      attempt.settled = true;
      clearTimeout(timer);
      if (!listening) subscription?.unsubscribe();
    }
  }

  /** Hands on the later replies to a decided request until `watch.until` settles or the TTL ends; returns the subscription's new handler. */
  private listenLater(subscription: Subscription, watch: LaterReplies, identity: string, requestId: string, seen: Set<string>): (bytes: Uint8Array) => void {
    const stop = () => {
      clearTimeout(ttl);
      subscription.unsubscribe();
    };
    const ttl = setTimeout(stop, this.settings.ttl * 1000);
    ttl.unref();
    watch.until.then(stop, stop);
    return (bytes) => {
      const print = fingerprint(bytes);
      if (seen.has(print) || seen.size > EARLY_REPLIES_KEPT) return;
      const verdict = this.judge(bytes, identity, requestId);
      if (typeof verdict === "string") return;
      seen.add(print);
      const body = parseMcorpcReply(verdict.payload);
      if (typeof body !== "string" && body.statuscode === 0) watch.onReply({ sender: identity, statuscode: 0, statusmsg: body.statusmsg, data: body.data }, print);
    };
  }

  /** Either the decoded reply that decides the call, or why this message was ignored. */
  private judge(bytes: Uint8Array, identity: string, requestId: string): IncomingReply | string {
    let reply: IncomingReply;
    try {
      reply = decodeReply(bytes, this.settings.maxReplyBytes);
    } catch (error) {
      return error instanceof Error ? error.message : "undecodable reply";
    }
    if (reply.transportSender !== identity) return `reply from unexpected sender ${quoted(reply.transportSender)}`;
    if (reply.senderId !== identity) return `reply envelope names unexpected sender ${quoted(reply.senderId)}`;
    if (reply.requestId !== requestId) return `reply from ${quoted(reply.senderId)} is for another request`;
    if (reply.version !== this.settings.protocolVersion) return `reply from ${quoted(reply.senderId)} uses protocol v${reply.version}`;
    return reply;
  }

  private async publish(call: RpcCall, send: PendingSend): Promise<void> {
    const { collective, senderId, callerId, signer, ttl, clock } = this.settings;
    const rpc = `${call.agent}#${call.action}`;
    const notSent = (why: string) => new RpcNotSentError(call.identity, rpc, `not sent: ${why}`);
    // Encoded (and signed) before the flush, so nothing but the checks stands between them and the publish.
    const payload = new TextEncoder().encode(JSON.stringify({ agent: call.agent, action: call.action, data: call.data }));
    const request = encodeRequest({
      id: send.requestId,
      senderId,
      callerId,
      collective,
      agent: call.agent,
      ttl,
      timeMs: send.stampedAt,
      filter: agentFilter(call.agent),
      payload,
      replyTo: send.replyTo,
      signer,
    });
    // The subscription must be registered on the server before a fast node can answer (§1); the
    // wait for it is bounded by the send-by instant.
    const budgetMs = send.sendBy - clock.monotonic();
    if (budgetMs <= 0) throw notSent("the send-by instant passed before the attempt started");
    if (!(await this.flushWithin(budgetMs))) throw notSent(`the connection did not flush within ${Math.ceil(budgetMs)} ms before the send-by instant`);
    // Synchronous from here to the publish: nothing can settle the attempt in between.
    if (send.attempt.settled) throw notSent("the attempt settled while the connection flushed");
    if (clock.monotonic() >= send.sendBy) throw notSent("the send-by instant passed while the connection flushed");
    this.settings.onPublish?.({ requestId: send.requestId, identity: call.identity, agent: call.agent, action: call.action, stampedAt: send.stampedAt });
    this.nc.publish(nodeSubject(collective, call.identity), request);
    send.attempt.published = true;
    this.unconfirmed++;
    this.flushes.request().then(
      () => {
        this.unconfirmed--;
        send.attempt.confirmed = true;
      },
      () => this.unconfirmed--,
    );
  }

  private async flushWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    try {
      return await Promise.race([this.flushes.request().then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
