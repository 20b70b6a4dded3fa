/**
 * Ticks (docs/lease.md, "Between the minutes"): EventBridge fires at most once a minute, but the
 * lease must be kept every `lease.renew_interval` and startup events taken within seconds. So each
 * keeper run (every minute) arms the minute ahead as delayed messages on the deployment's lifecycle
 * queue, one SendMessageBatch: a leader one tick per keep interval, a standby one tick at the
 * moment the lease it saw becomes claimable. A tick keeps or contests the lease once and, while
 * this deployment leads, takes the startup events waiting for the site. Nothing re-arms itself, so
 * no chain can be lost or doubled: a lost tick is covered by the next one (the lease outlives
 * two), a lost keeper run by the next run a minute later, and a duplicated one only adds rounds.
 */
import { messageOf } from "../errors";
import { controlBody, controlContent } from "./control-message";
import type { Clock } from "../ports/clock";
import type { LeaseGate, LeaseOutcome } from "../ports/lease-gate";
import type { Logger } from "../ports/logger";
import type { BridgeResult, LifecycleBridge } from "./lifecycle-events";
import type { InvocationContext, MessageQueue } from "./use-case-ports";

/** SQS delays a message by at most 15 minutes. */
const MAX_DELAY_SECONDS = 900;
/** A tick stops taking events this long before the next one is due, so two ticks rarely overlap. */
const TICK_STOP_BEFORE_NEXT_MS = 1_000;
/** ...and this long before its Lambda deadline. */
const TICK_STOP_BEFORE_DEADLINE_MS = 2_000;

/** The body of a tick message: when it was meant to run (wall-clock ms). */
export interface Tick {
  dueAt: number;
}

const TICK_FIELD = "provisionerTick";

const tickBody = (dueAt: number): string => controlBody(TICK_FIELD, { dueAt });

/** The tick a lifecycle queue message holds; undefined for anything else (a queued startup event). */
export function parseTick(body: string): Tick | undefined {
  const tick = controlContent(body, TICK_FIELD);
  return typeof tick?.dueAt === "number" && Number.isFinite(tick.dueAt) ? { dueAt: tick.dueAt } : undefined;
}

/**
 * The delays (whole seconds) of the ticks a round's outcome calls for: holding, one per keep
 * interval up to the next keeper run; not holding, one when the lease becomes claimable (a
 * crashed leader's successor then opens its gate within seconds of the earliest safe moment).
 */
function tickDelays(outcome: LeaseOutcome, timing: TickTiming, now: number): number[] {
  if (outcome.holding) {
    const delays: number[] = [];
    for (let at = timing.keepIntervalMs; at <= timing.armAheadMs; at += timing.keepIntervalMs) delays.push(Math.round(at / 1000));
    return delays;
  }
  if (outcome.claimableAt === undefined) return [];
  const delay = Math.max(0, Math.ceil((outcome.claimableAt - now) / 1000));
  return delay <= MAX_DELAY_SECONDS ? [delay] : [];
}

/** When ticks come. */
interface TickTiming {
  /** `lease.renew_interval`: a leader's ticks are this far apart. */
  keepIntervalMs: number;
  /** Up to the keeper's next run (its schedule's rate). */
  armAheadMs: number;
}

export interface TickArmingDeps {
  /** This deployment's lifecycle queue: the ticks are its delayed messages. */
  queue: Pick<MessageQueue, "sendAll">;
  timing: TickTiming;
  clock: Clock;
  logger: Logger;
}

/** Arms the ticks a lease round's outcome calls for (the keeper's every minute, a takeover's at once). */
export class TickArming {
  constructor(private readonly deps: TickArmingDeps) {}

  /** Returns how many ticks SQS took. Never throws: the next keeper run arms again. */
  async arm(outcome: LeaseOutcome): Promise<number> {
    const { clock, logger, timing } = this.deps;
    const now = clock.now();
    const delays = tickDelays(outcome, timing, now);
    if (delays.length === 0) return 0;
    try {
      const accepted = await this.deps.queue.sendAll(delays.map((delay) => ({ body: tickBody(now + delay * 1000), delaySeconds: delay })));
      return accepted.filter(Boolean).length;
    } catch (error) {
      logger.warn("could not arm the ticks; the next keeper run arms them again", { error: messageOf(error) });
      return 0;
    }
  }
}

export interface TicksDeps {
  gate: Pick<LeaseGate, "acquireOrKeep">;
  /** Takes the startup events waiting for the site while this deployment leads. */
  bridge: Pick<LifecycleBridge, "run">;
  arming: Pick<TickArming, "arm">;
  /** `lease.renew_interval`. */
  keepIntervalMs: number;
  clock: Clock;
  logger: Logger;
}

export interface TickResult {
  /** Ticks of the batch that were past their slot (another tick followed them): not run. */
  stale: number;
  holding: boolean;
  bridged?: BridgeResult;
  armed: number;
}

/** What a tick does: a lease round, then the waiting startup events while this deployment leads. */
export class Ticks {
  constructor(private readonly deps: TicksDeps) {}

  /**
   * One tick for the fresh ticks of a batch (several arrive together after a delay): a lease round,
   * then, while this deployment leads, the waiting startup events until shortly before the next
   * tick. A round that took the lease over arms the rest of the minute, which no keeper run did.
   */
  async run(ticks: readonly Tick[], ctx: InvocationContext): Promise<TickResult> {
    const { clock, gate, logger, keepIntervalMs } = this.deps;
    const now = clock.now();
    const fresh = ticks.filter((tick) => now <= tick.dueAt + keepIntervalMs);
    const stale = ticks.length - fresh.length;
    if (fresh.length === 0) {
      logger.debug("skipping ticks past their slot", { stale });
      return { stale, holding: false, armed: 0 };
    }
    let outcome: LeaseOutcome;
    try {
      outcome = await gate.acquireOrKeep(() => ctx.remainingMs() - TICK_STOP_BEFORE_DEADLINE_MS);
    } catch (error) {
      // The gate logged and counted the store failure; the next tick tries again.
      logger.debug("tick: the lease round failed", { error: messageOf(error) });
      return { stale, holding: false, armed: 0 };
    }
    const armed = this.armsAgain(outcome) ? await this.deps.arming.arm(outcome) : 0;
    if (!outcome.holding) return { stale, holding: false, armed };
    const forMs = Math.min(keepIntervalMs - TICK_STOP_BEFORE_NEXT_MS, ctx.remainingMs() - TICK_STOP_BEFORE_DEADLINE_MS);
    try {
      return { stale, holding: true, bridged: await this.deps.bridge.run(clock.monotonic() + forMs), armed };
    } catch (error) {
      // The lease was kept all the same; the events wait in the stream for the next tick.
      logger.error("tick: could not take the lifecycle events; the next tick tries again", { error });
      return { stale, holding: true, armed };
    }
  }

  /**
   * A round that took the lease over arms the rest of the minute (no keeper run did). One that
   * found the lease about to become claimable (within a keep interval: a tick that came a little
   * early, or a leader whose last renewal this round just saw) arms one tick for that moment; a
   * lease kept by a live leader is never that close, so this never becomes a chain.
   */
  private armsAgain(outcome: LeaseOutcome): boolean {
    if (outcome.holding) return outcome.tookOver;
    return outcome.claimableAt !== undefined && outcome.claimableAt - this.deps.clock.now() <= this.deps.keepIntervalMs;
  }
}
