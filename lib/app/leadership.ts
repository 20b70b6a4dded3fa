/**
 * Leadership (docs/behaviour.md §5, §8): the discovery run of the leader, the lease keeper, and
 * the announcements: the startup event and an immediate discovery once per won term, or once per
 * container when leader election is off.
 */
import { messageOf } from "../errors";
import type { LeaseGate, LeaseOutcome } from "../ports/lease-gate";
import { EXTRA_METRIC, METRIC } from "../ports/metric-names";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import type { AdmissionRegistry } from "../admission/registry";
import type { WaitingName } from "../ports/admission-store";
import type { RandomSource } from "../engine/retry";
import type { AdmissionFlow } from "./admission-flow";
import { BacklogPacer } from "./backlog-pacer";
import { mapLimited } from "./concurrency";
import { selectDiscovered } from "./discovery-selection";
import { continuationBody, type DiscoveryContinuation } from "./discovery-continuation";
import type { TickArming } from "./ticks";
import type { Broker, DiscoveredCollision, InvocationContext, MessageQueue } from "./use-case-ports";
import { uniquenessProblem } from "../choria/identity";
import type { QuarantineEvidence } from "../admission/quarantine";

export interface DiscoverResult {
  paused: boolean;
  term?: number;
  discovered: number;
  admitted: number;
}

/** Names a discovery left out that a continuation may admit. */
interface LeftOut {
  /** Not admitted before the invocation's deadline. */
  leftForNextCycle: number;
  /** Not admitted: the pacer found no room for them in the time there was. */
  leftPaced: number;
  /** New names over the budget (or the cap), left waiting. */
  droppedOverBudget: number;
}

export interface KeepLeaseResult {
  holding: boolean;
  /** The term this run's round won, if it won one. */
  wonTerm?: number;
  /** Ticks armed for the minute ahead (ticks.ts). */
  armed: number;
}

interface LeadershipSettings {
  leaderElection: boolean;
  /** The provisioner's identity (logged with its startup event). */
  identity: string;
  /** `discovery_max_nodes`, logged when discovery stops there. */
  discoveryMaxNodes: number;
  /** `discovery_new_names_per_interval`: names the registry does not know that one discovery admits at most. */
  discoveryNewNamesPerInterval: number;
  /** `interval`: the scheduled discovery's period, which bounds a chain of continuations. */
  discoveryIntervalMs: number;
  /** `discovery_backlog`: measured work a discovery keeps waiting in the host-work queue, in ms; 0: no pacing. */
  discoveryBacklogMs: number;
  /** Ms kept back from the Lambda deadline. */
  deadlineMarginMs: number;
  /** `allow_short_identities`: names without a domain part are admitted, not quarantined. */
  allowShortIdentities: boolean;
}

export interface LeadershipDeps {
  settings: LeadershipSettings;
  gate: Pick<LeaseGate, "acquireOrKeep" | "assertOpen">;
  /** Arms the ticks that keep the lease between the keeper's runs. */
  ticks: Pick<TickArming, "arm">;
  broker: Pick<Broker, "discover" | "publishStartup">;
  admission: Pick<AdmissionFlow, "admitAndEnqueue">;
  /**
   * Which discovered names are known, so they are admitted before new ones, and quarantined (and,
   * from the same listing, the provisioning JWTs' forecast, gauged); and which new ones waited before.
   */
  registry: Pick<AdmissionRegistry, "siteNames" | "waitingNames" | "rememberWaiting" | "quarantine">;
  /** Its depth paces admission and is reported after each discovery. */
  hostWork: Pick<MessageQueue, "counts">;
  /** This deployment's lifecycle queue: a discovery that left names out queues its continuation there. */
  continuations: Pick<MessageQueue, "send">;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  /** Orders the new names a discovery chooses from (default Math.random). */
  random?: RandomSource;
}

/** Discovered hosts are admitted and queued in chunks of one SendMessageBatch. */
const DISCOVERY_CHUNK = 10;
/**
 * Five chunks are fifty conditional writes at once: the SDK's default pool of 50 sockets per client,
 * so the whole pool works. With two, a 1,000-node fleet on a store answering a chunk in a second
 * (DynamoDB Local under load) got only about half admitted before the 30 s invocation's deadline and
 * the rest waited a whole interval for the next discovery.
 */
const DISCOVERY_CHUNKS_IN_FLIGHT = 5;
/** Time one chunk (ten conditional writes and one SendMessageBatch) may need before the deadline. */
const DISCOVERY_CHUNK_BUDGET_MS = 2_000;
/**
 * Hosts a paced discovery always lets wait: the chunks it has in flight, so the queue's consumers
 * are never starved while the first rate is measured.
 */
const DISCOVERY_BACKLOG_FLOOR = DISCOVERY_CHUNK * DISCOVERY_CHUNKS_IN_FLIGHT;
/** How often a paced discovery waiting for room reads the queue's counts. */
const DISCOVERY_BACKLOG_POLL_MS = 500;

export class Leadership {
  /** discover() calls in progress: a term won inside one does not start a second discovery. */
  private discovering = 0;
  private announcedUnelected = false;

  constructor(private readonly deps: LeadershipDeps) {}

  /**
   * The lease gate's onWon, once per term for the whole deployment (the marker in the lease item,
   * not once per container): announce the new leader and look for nodes at once. `remainingMs` is
   * the time left to the invocation whose round won the term, when it told the gate: with it, the
   * discovery may send again an admission whose outcome stayed unknown, as a scheduled one does.
   */
  async onWonTerm(term: number, remainingMs?: () => number): Promise<void> {
    this.deps.logger.info("announcing the new lease term: publishing the startup event and discovering", { term });
    await this.publishStartup();
    if (this.discovering === 0) await this.runDiscovery(term, remainingMs);
  }

  async discover(ctx: InvocationContext): Promise<DiscoverResult> {
    const { gate, logger, settings } = this.deps;
    this.discovering++;
    try {
      await this.announceUnelected();
      let outcome;
      try {
        outcome = await gate.acquireOrKeep(() => ctx.remainingMs() - settings.deadlineMarginMs);
      } catch (error) {
        logger.warn("paused: the lease store could not be reached, not discovering", { error: messageOf(error) });
        return { paused: true, discovered: 0, admitted: 0 };
      }
      if (!outcome.holding) {
        logger.info("paused: another deployment holds the lease, not discovering", {
          holder: outcome.current?.holder,
          currentTerm: outcome.current?.term,
        });
        return { paused: true, discovered: 0, admitted: 0 };
      }
      return { paused: false, ...(await this.runDiscovery(outcome.term, () => ctx.remainingMs() - settings.deadlineMarginMs)) };
    } finally {
      this.discovering--;
    }
  }

  /**
   * The keeper's run (every minute): one round that keeps or contests the lease, then the ticks
   * for the minute ahead (ticks.ts). A store failure is logged and counted by the gate; the ticks
   * armed a minute ago still come.
   */
  async keepLease(ctx: InvocationContext): Promise<KeepLeaseResult> {
    const { gate, ticks, logger, settings } = this.deps;
    await this.announceUnelected();
    let outcome: LeaseOutcome;
    try {
      outcome = await gate.acquireOrKeep(() => ctx.remainingMs() - settings.deadlineMarginMs);
    } catch (error) {
      logger.warn("the keeper's lease round failed; the ticks already armed still run", { error: messageOf(error) });
      return { holding: false, armed: 0 };
    }
    const armed = await ticks.arm(outcome);
    const result: KeepLeaseResult = { holding: outcome.holding, armed, ...(outcome.holding && outcome.wonNewTerm ? { wonTerm: outcome.term } : {}) };
    logger.info("lease keeper run finished", { ...result, ...(outcome.holding ? { term: outcome.term } : {}) });
    return result;
  }

  /**
   * The lifecycle function's run of a continuation (discovery-continuation.ts): the next discovery at
   * once, under the continued term and with the invocation's remaining time, only while this
   * deployment still holds that term. A continuation of an older term is dropped: the current
   * leader's own discovery finds the hosts.
   */
  async continueDiscovery(continuation: DiscoveryContinuation, ctx: InvocationContext): Promise<DiscoverResult> {
    const { logger, settings } = this.deps;
    const { term } = continuation;
    // Checked before counting this discovery in: a round here that wins a newer term announces it with its own discovery.
    const termLost = await this.termLostWithin(term, DISCOVERY_CHUNK_BUDGET_MS);
    if (termLost !== undefined) {
      logger.info("dropping a discovery continuation of a term this deployment does not hold now; the leader's own discovery finds the hosts", { term, reason: termLost });
      return { paused: true, discovered: 0, admitted: 0 };
    }
    this.discovering++;
    try {
      return { paused: false, ...(await this.runDiscovery(term, () => ctx.remainingMs() - settings.deadlineMarginMs, continuation.until)) };
    } finally {
      this.discovering--;
    }
  }

  /**
   * Admits and queues discovered hosts chunk by chunk (admitInChunks). What it leaves out for its
   * deadline, its pacing or the new-names budget, a continuation looks for again at once while the
   * chain lasts: until `chainUntil` (wall-clock ms), or, for the scheduled or won-term discovery that
   * begins a chain, one interval from now.
   */
  private async runDiscovery(term: number, remainingMs?: () => number, chainUntil?: number): Promise<Omit<DiscoverResult, "paused">> {
    const { logger, settings, clock } = this.deps;
    const until = chainUntil ?? clock.now() + settings.discoveryIntervalMs;
    const found = await this.discoverNames(term);
    if (!found) return { term, discovered: 0, admitted: 0 };
    const { selected, droppedOverBudget } = await this.selectKnownFirst(found.identities, found.collisions, term);
    logger.info(`discovered ${selected.length} nodes in provisioning mode`, { term });
    const admitted = await this.admitInChunks(selected, term, remainingMs);
    if (!admitted.termLost) {
      await this.queueContinuation({ term, until }, admitted.queued, { leftForNextCycle: admitted.leftForNextCycle, leftPaced: admitted.leftPaced, droppedOverBudget });
    }
    await this.gaugeQueue();
    return { term, discovered: selected.length, admitted: admitted.queued };
  }

  /** The broker's discovery, counted; undefined when it failed (logged and counted). */
  private async discoverNames(term: number): Promise<{ identities: string[]; collisions: DiscoveredCollision[] } | undefined> {
    const { broker, logger, metrics, settings } = this.deps;
    metrics.count(METRIC.discoverCycles);
    try {
      const result = await broker.discover();
      if (result.capped) {
        // Either a fleet larger than the cap is booting, or someone is forging replies: both need a look.
        metrics.count(EXTRA_METRIC.discoveryCapped);
        logger.warn("discovery stopped reading replies at its collection bound; the next discovery finds the rest", {
          term,
          collected: result.identities.length,
          maxNodes: settings.discoveryMaxNodes,
          replies: result.replies,
          skipped: result.skipped,
        });
      }
      return { identities: result.identities, collisions: result.collisions ?? [] };
    } catch (error) {
      metrics.count(METRIC.discoveryErrors);
      logger.error("discovery failed", { term, error });
      return undefined;
    }
  }

  /**
   * Admits and queues the hosts chunk by chunk, so provisioning starts while discovery is still
   * admitting, and no faster than the hosts are worked off (BacklogPacer) when the invocation has a
   * deadline. Near the deadline it stops admitting: a host never admitted is found again by the
   * next discovery, whereas one admitted but never queued would wait out a whole interval.
   */
  private async admitInChunks(identities: string[], term: number, remainingMs?: () => number) {
    const { admission, logger, metrics } = this.deps;
    const counts = { queued: 0, leftForNextCycle: 0, leftPaced: 0, leftOutOfTerm: 0, termLost: undefined as string | undefined };
    // Without a deadline a wait for room would have no end; what the floor admits needs no pacing.
    const pacer = remainingMs && identities.length > DISCOVERY_BACKLOG_FLOOR ? await this.startPacer(term) : undefined;
    const mayWait = () => (remainingMs?.() ?? 0) >= DISCOVERY_CHUNK_BUDGET_MS + DISCOVERY_BACKLOG_POLL_MS;
    await mapLimited(chunked(identities, DISCOVERY_CHUNK), DISCOVERY_CHUNKS_IN_FLIGHT, async (chunk) => {
      if (remainingMs && remainingMs() < DISCOVERY_CHUNK_BUDGET_MS) {
        counts.leftForNextCycle += chunk.length;
        return;
      }
      if (pacer && !(await pacer.roomFor(chunk.length, mayWait))) {
        counts.leftPaced += chunk.length;
        return;
      }
      let queuedHere = 0;
      try {
        // A discovery may admit for most of a minute, longer than one lease round is valid for, and
        // a won term's discovery runs inside the keeper's round, which keeps the lease only after it. So each
        // chunk goes out only under a term confirmed for this invocation for as long as the chunk may
        // take: the read keeps the lease when needed, and a deposed leader queues no stale work.
        counts.termLost ??= await this.termLostWithin(term, DISCOVERY_CHUNK_BUDGET_MS);
        if (counts.termLost !== undefined) {
          counts.leftOutOfTerm += chunk.length;
          return;
        }
        const result = await admission.admitAndEnqueue(chunk, "discovery", term, remainingMs);
        // As in Go, the counter counts hosts admitted, not every reply.
        metrics.count(METRIC.discovered, result.queued.length + result.notQueued.length);
        queuedHere = result.queued.length;
      } finally {
        pacer?.settled(chunk.length, queuedHere);
      }
      counts.queued += queuedHere;
    });
    const { queued, leftForNextCycle, leftPaced, leftOutOfTerm, termLost } = counts;
    if (leftForNextCycle > 0) logger.warn("stopped admitting before the invocation deadline; the next discovery finds the rest", { term, leftForNextCycle });
    if (leftPaced > 0 && pacer) {
      // The normal end of a discovery of a fleet larger than the provisioners work off in one.
      logger.info(`admitted as fast as hosts were worked off; the next discovery admits the other ${leftPaced}`, { term, admitted: queued, leftPaced, waitingBound: pacer.bound() });
    }
    if (leftOutOfTerm > 0) {
      logger.warn("stopped admitting: the lease term could not be confirmed; the next leader's discovery finds the rest", { term, leftOutOfTerm, reason: termLost });
    }
    return counts;
  }

  /**
   * Queues the continuation of a discovery that left names out, once it made progress: one that
   * queued nothing (a store outage, a forger's names all admitted already) would only find the same
   * names again, so the chain ends there, as it does past `continuation.until`; the next scheduled
   * discovery looks again. Nothing is lost when the queue refuses it: that discovery finds the rest.
   */
  private async queueContinuation(continuation: DiscoveryContinuation, queued: number, left: LeftOut): Promise<void> {
    const { continuations, clock, logger } = this.deps;
    const leftOut = left.leftForNextCycle + left.leftPaced + left.droppedOverBudget;
    if (leftOut === 0 || queued === 0 || clock.now() >= continuation.until) return;
    try {
      await continuations.send({ body: continuationBody(continuation) });
    } catch (error) {
      logger.warn("could not queue the discovery's continuation; the next scheduled discovery finds the rest", { term: continuation.term, ...left, error: messageOf(error) });
      return;
    }
    logger.info(`queued a discovery continuation for the ${leftOut} names left out: the next discovery runs at once`, { term: continuation.term, admitted: queued, ...left });
  }

  /** A pacer over the host-work queue, or undefined when pacing is off or the queue cannot be read. */
  private async startPacer(term: number): Promise<BacklogPacer | undefined> {
    const { hostWork, clock, logger, settings } = this.deps;
    const pacer = new BacklogPacer({
      queue: hostWork,
      clock,
      backlogMs: settings.discoveryBacklogMs,
      floor: DISCOVERY_BACKLOG_FLOOR,
      pollMs: DISCOVERY_BACKLOG_POLL_MS,
      onReadFailure: (error) => logger.warn("could not read the host-work queue's depth; admitting without pacing", { term, error: messageOf(error) }),
    });
    return (await pacer.start()) ? pacer : undefined;
  }

  /**
   * Undefined while `term` is this deployment's for at least `forMs` more, confirmed for this
   * invocation (a lease round when the last confirmation runs out sooner); else why not.
   */
  private async termLostWithin(term: number, forMs: number): Promise<string | undefined> {
    try {
      await this.deps.gate.assertOpen(term, forMs);
      return undefined;
    } catch (error) {
      return messageOf(error);
    }
  }

  /**
   * Quarantined and suspect names left out (holdBack), known names first, then new ones up to the budget, those left waiting by earlier discoveries
   * first (lib/app/discovery-selection.ts), all within the cap; what is left out is counted and the
   * names left waiting are remembered for the next discovery.
   */
  private async selectKnownFirst(discovered: string[], collisions: readonly DiscoveredCollision[], term: number): Promise<{ selected: string[]; droppedOverBudget: number }> {
    const { registry, clock, logger, metrics, settings } = this.deps;
    const [{ known, quarantined }, waiting] = await Promise.all([
      registry.siteNames().then(
        (names) => {
          // The site's one listing a minute: the bootstrap expiry forecast's gauges ride on it.
          metrics.gauge(EXTRA_METRIC.provisioningJwtsExpiring, names.provisioningJwts.expiring);
          metrics.gauge(EXTRA_METRIC.provisioningJwtsExpired, names.provisioningJwts.expired);
          return names;
        },
        (error: unknown) => {
          // Without the registry every name counts as new: the budget still bounds what a flood admits,
          // and the admission itself refuses a quarantined host.
          logger.warn("could not read the known hosts; treating every discovered name as new", { term, error: messageOf(error) });
          return { known: new Set<string>(), quarantined: undefined };
        },
      ),
      registry.waitingNames().catch((error: unknown): WaitingName[] => {
        // The memory only orders new names: without it they are chosen at random, as on a first discovery.
        logger.warn("could not read the names earlier discoveries left waiting; choosing new names at random", { term, error: messageOf(error) });
        return [];
      }),
    ]);
    const identities = await this.holdBack(discovered, collisions, quarantined, term);
    const selection = selectDiscovered(
      identities,
      known,
      { cap: settings.discoveryMaxNodes, newBudget: settings.discoveryNewNamesPerInterval },
      { waiting, now: clock.now(), random: this.deps.random ?? Math.random },
    );
    const dropped = selection.droppedOverBudget + selection.droppedOverCap;
    if (dropped > 0) {
      metrics.count(EXTRA_METRIC.discoveryNamesDropped, dropped);
      logger.warn("discovery left names out over discovery_new_names_per_interval or discovery_max_nodes; the next discovery sees them again", {
        term,
        droppedNew: selection.droppedOverBudget,
        droppedKnown: selection.droppedOverCap,
        newNamesPerInterval: settings.discoveryNewNamesPerInterval,
        maxNodes: settings.discoveryMaxNodes,
        waiting: selection.waiting.length,
      });
    }
    // Nothing waited and nothing waits: a discovery of hosts the registry knows costs no write.
    if (waiting.length > 0 || selection.waiting.length > 0) {
      await registry.rememberWaiting(selection.waiting).catch((error: unknown) => {
        logger.warn("could not remember the names this discovery left waiting; the next one chooses among them at random", { term, error: messageOf(error) });
      });
    }
    return { selected: selection.selected, droppedOverBudget: selection.droppedOverBudget };
  }

  /**
   * The discovered names that may be admitted: not quarantined already, not answered for by two
   * senders in this discovery, and able to tell one machine from another (docs/audit.md). The
   * newly suspect ones are quarantined with their evidence; the gauge counts every quarantined host
   * (`quarantined` is undefined when the registry could not be read).
   */
  private async holdBack(discovered: readonly string[], collisions: readonly DiscoveredCollision[], quarantined: ReadonlySet<string> | undefined, term: number): Promise<string[]> {
    const { registry, logger, metrics, settings } = this.deps;
    const suspects = new Map<string, QuarantineEvidence>();
    for (const { identity, replies } of collisions) {
      suspects.set(identity, { reason: `${replies.length} different replies to one discovery: two machines answer as this identity`, senders: replies });
    }
    for (const identity of discovered) {
      const problem = uniquenessProblem(identity, settings.allowShortIdentities);
      if (problem && !suspects.has(identity)) suspects.set(identity, { reason: `the identity ${problem}`, senders: [] });
    }
    const held = new Set(quarantined);
    await mapLimited([...suspects].filter(([identity]) => !quarantined?.has(identity)), DISCOVERY_CHUNK, async ([identity, evidence]) => {
      held.add(identity);
      logger.error(`quarantined ${identity}: ${evidence.reason}; release it with choria-provisioner quarantine release once resolved`, { identity, term, senders: evidence.senders.length });
      try {
        await registry.quarantine(identity, evidence, term, "discovery");
      } catch (error) {
        logger.error("could not record the quarantine; the host is left out of this discovery and judged again by the next", { identity, term, error: messageOf(error) });
      }
    });
    // Unread (the registry did not answer) is not none: no gauge, so the alarm keeps its state.
    if (quarantined) metrics.gauge(EXTRA_METRIC.hostsQuarantined, held.size);
    return discovered.filter((identity) => !held.has(identity) && !suspects.has(identity));
  }

  private async gaugeQueue(): Promise<void> {
    try {
      const counts = await this.deps.hostWork.counts();
      this.deps.metrics.gauge(METRIC.workQueueEntries, counts.visible + counts.delayed);
      this.deps.metrics.gauge(METRIC.waitingNodes, counts.visible + counts.delayed + counts.inFlight);
    } catch (error) {
      this.deps.logger.debug("could not read the host-work queue depth", { error: messageOf(error) });
    }
  }

  private async publishStartup(): Promise<void> {
    try {
      await this.deps.broker.publishStartup();
      this.deps.logger.info("published the provisioner startup event", { identity: this.deps.settings.identity });
    } catch (error) {
      this.deps.logger.error("could not publish the provisioner startup event", { error });
    }
  }

  /** Without leader election there is no term to win: announce once per container instead. */
  private async announceUnelected(): Promise<void> {
    if (this.deps.settings.leaderElection || this.announcedUnelected) return;
    this.announcedUnelected = true;
    await this.publishStartup();
  }
}

function chunked<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size));
  return chunks;
}
