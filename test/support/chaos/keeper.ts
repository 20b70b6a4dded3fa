/**
 * A chaos deployment's keeper as production runs it (lib/app/ticks.ts): every keeper period
 * (EventBridge's minute, at a phase of its own) one run of the real `Leadership.keepLease`, which
 * keeps or contests the lease once and arms the ticks of the period ahead; each tick is a delayed
 * message (SQS DelaySeconds, modelled with a timer on the deployment's scaled clock) that, when it
 * arrives, runs the real `Ticks.run`: one lease round, and while holding the bridge (none here: the
 * chaos suite's nodes are found by discovery, so the bridge takes nothing). Ticks are not delivered
 * once the deployment is killed or stopped: its whole stack is gone.
 */
import { Leadership } from "../../../lib/app/leadership";
import type { BridgeResult } from "../../../lib/app/lifecycle-events";
import { parseTick, TickArming, Ticks } from "../../../lib/app/ticks";
import type { InvocationContext, OutgoingMessage } from "../../../lib/app/use-case-ports";
import type { Clock } from "../../../lib/ports/clock";
import type { LeaseGate } from "../../../lib/ports/lease-gate";
import { silentLogger } from "../../../lib/ports/logger";
import { noMetrics } from "../fakes";

/** The leaseKeeper and lifecycle functions' timeout (serverless.yml), on the deployment's clock. */
const INVOCATION_MS = 30_000;

/** Leadership's discovery half: the chaos deployment's own lead loop does it, never through the keeper. */
const DISCOVERY_PARTS = new Proxy(
  {},
  {
    get: () => () => Promise.reject(new Error("the chaos keeper runs only keepLease")),
  },
) as never;

const NO_EVENTS: BridgeResult = { mode: "jetstream", handled: 0, deadLettered: 0, paused: false };

export interface ChaosKeeperOptions {
  gate: Pick<LeaseGate, "acquireOrKeep" | "assertOpen">;
  clock: Clock;
  /** `lease.renew_interval`: a holder's ticks are this far apart. */
  keepIntervalMs: number;
  /** The keeper's schedule (60 s on AWS), on the deployment's clock. */
  keeperRateMs: number;
  /** Where in its period the keeper's schedule fires, on the deployment's clock. */
  phaseMs: number;
  /** How many times faster than real time the deployment's clock runs. */
  scale: number;
}

export class ChaosKeeper {
  /** Keeper runs and tick runs that have finished. */
  keeperRuns = 0;
  ticksRun = 0;
  private stopped = false;
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly leadership: Leadership;
  private readonly ticks: Ticks;

  constructor(private readonly options: ChaosKeeperOptions) {
    const { gate, clock, keepIntervalMs, keeperRateMs } = options;
    const arming = new TickArming({ queue: { sendAll: async (messages) => messages.map((message) => this.deliverLater(message)) }, timing: { keepIntervalMs, armAheadMs: keeperRateMs }, clock, logger: silentLogger });
    this.leadership = new Leadership({
      settings: { leaderElection: true, identity: "provisioner.chaos", discoveryMaxNodes: 1_000, discoveryNewNamesPerInterval: 1_000, discoveryIntervalMs: 60_000, discoveryBacklogMs: 0, allowShortIdentities: false, deadlineMarginMs: 1_000 },
      ...{ gate, ticks: arming, broker: DISCOVERY_PARTS, admission: DISCOVERY_PARTS, registry: DISCOVERY_PARTS, hostWork: DISCOVERY_PARTS, continuations: DISCOVERY_PARTS },
      ...{ clock, logger: silentLogger, metrics: noMetrics },
    });
    this.ticks = new Ticks({ gate, bridge: { run: async () => NO_EVENTS }, arming, keepIntervalMs, clock, logger: silentLogger });
  }

  /** The schedule starts: the first run at the phase, then one every keeper period. */
  start(): void {
    const run = () => {
      this.later(this.options.keeperRateMs, run);
      this.track(this.leadership.keepLease(this.context()).then(() => this.keeperRuns++));
    };
    this.later(this.options.phaseMs, run);
  }

  /** No more keeper runs or ticks (armed ticks are dropped); returns once the runs in flight are over. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** SQS takes the tick and delivers it after its delay, to a lifecycle invocation that runs it. */
  private deliverLater(message: OutgoingMessage): boolean {
    const tick = parseTick(message.body);
    if (!tick || this.stopped) return false;
    this.later((message.delaySeconds ?? 0) * 1_000, () => this.track(this.ticks.run([tick], this.context()).then(() => this.ticksRun++)));
    return true;
  }

  private context(): InvocationContext {
    const deadline = this.options.clock.monotonic() + INVOCATION_MS;
    return { remainingMs: () => deadline - this.options.clock.monotonic() };
  }

  private later(ms: number, fire: () => void): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (!this.stopped) fire();
    }, ms / this.options.scale);
    this.timers.add(timer);
  }

  private track(run: Promise<unknown>): void {
    // A failed round is the gate's to log and count; the next tick or keeper run tries again.
    const settled = run.catch(() => undefined).finally(() => this.inFlight.delete(settled));
    this.inFlight.add(settled);
  }
}
