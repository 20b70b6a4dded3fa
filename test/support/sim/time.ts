/**
 * Virtual time for the whole-pipeline simulation, and the containers that run on it.
 *
 * True time starts at 0 and moves only when the next timer fires; after each timer every piece of
 * code it woke runs to its next wait before the next timer fires, so one seed gives one order of
 * events. A container (one Lambda function's process of one deployment) sees true time through
 * its own clock: its wall clock skewed, its monotonic clock offset. It can be frozen (its code makes
 * no progress until it thaws: sleeps and answers addressed to it wait) or crashed (everything it
 * was waiting for never arrives, so its code simply stops; a new container takes its place).
 */
import type { Clock } from "../../../lib/ports/clock";

interface Timer {
  at: number;
  sequence: number;
  fire: () => void;
}

/** Wall-clock epoch of true time 0: an ordinary date, so certificates and JWT times read naturally. */
export const SIM_EPOCH_MS = Date.UTC(2026, 0, 5, 9, 0, 0);

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

export class VirtualTime {
  now = 0;
  private sequence = 0;
  private readonly timers: Timer[] = [];

  /** Runs `fire` at true time `at` (now, if that has passed). */
  at(at: number, fire: () => void): void {
    const timer = { at: Math.max(this.now, at), sequence: this.sequence++, fire };
    let low = 0;
    let high = this.timers.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.timers[middle]!.at <= timer.at) low = middle + 1;
      else high = middle;
    }
    this.timers.splice(low, 0, timer);
  }

  after(ms: number, fire: () => void): void {
    this.at(this.now + Math.max(0, ms), fire);
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.after(ms, resolve));
  }

  /** Fires timers in order up to `until`, letting all woken code run between them. */
  async run(until: number): Promise<void> {
    await settle();
    while (this.timers.length > 0 && this.timers[0]!.at <= until) {
      const timer = this.timers.shift()!;
      this.now = timer.at;
      timer.fire();
      await settle();
    }
    this.now = Math.max(this.now, until);
  }
}

/** A promise that never settles: what a crashed container waits for. */
const never = <T>() => new Promise<T>(() => undefined);

export class Container {
  private frozenUntil = 0;
  private crashed = false;
  /** What waits for a freeze to end. */
  private readonly thawed: Array<() => void> = [];

  constructor(
    readonly name: string,
    private readonly time: VirtualTime,
    private readonly wallSkewMs: number,
    private readonly monotonicOffsetMs: number,
  ) {}

  get dead(): boolean {
    return this.crashed;
  }

  get frozen(): boolean {
    return this.time.now < this.frozenUntil;
  }

  crash(): void {
    this.crashed = true;
  }

  freeze(forMs: number): void {
    this.frozenUntil = Math.max(this.frozenUntil, this.time.now + forMs);
    this.time.at(this.frozenUntil, () => this.wake());
  }

  /** Ends a freeze now: what was waiting for the container goes on at once. */
  thaw(): void {
    this.frozenUntil = Math.min(this.frozenUntil, this.time.now);
    this.wake();
  }

  private wake(): void {
    if (this.frozen) return;
    const waiting = this.thawed.splice(0);
    for (const resume of waiting) resume();
  }

  readonly clock: Clock = {
    now: () => Math.floor(SIM_EPOCH_MS + this.time.now + this.wallSkewMs),
    monotonic: () => this.time.now + this.monotonicOffsetMs,
    sleep: (ms) => this.arrive(this.time.sleep(ms)),
  };

  /**
   * What this container's code gets back from the outside (a store's answer, a reply, a timer):
   * it arrives only while the container runs, after a freeze ends, and never after a crash.
   */
  async arrive<T>(answer: Promise<T>): Promise<T> {
    let settled: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      settled = { ok: true, value: await answer };
    } catch (error) {
      settled = { ok: false, error };
    }
    while (!this.crashed && this.frozen) await new Promise<void>((resume) => this.thawed.push(resume));
    if (this.crashed) return never<T>();
    if (settled.ok) return settled.value;
    throw settled.error;
  }

  /** Runs `call` as this container: not at all once crashed, and only after a freeze ends. */
  async send<T>(call: () => Promise<T>): Promise<T> {
    await this.arrive(Promise.resolve());
    return this.arrive(call());
  }
}
