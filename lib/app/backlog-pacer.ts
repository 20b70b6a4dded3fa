/**
 * Paces one discovery's admissions to the rate the provisioners finish host work
 * (`discovery_backlog`, docs/behaviour.md §2). A host admitted is a host whose work waits in the
 * queue under this term; admitting a whole fleet at once only moves its wait from the node, where it
 * is harmless, into the queue, where a change of term makes it stale work. So the discovery keeps the
 * work waiting to be picked up (visible messages) to about `backlogMs` of the rate hosts are finished
 * at, measured since it started, and never below `floor`. Work in flight is not bounded: the provision
 * function works on as many hosts at once as it can, and while messages wait its consumers keep
 * scaling up. A host left out when the invocation ends is found again by the next discovery.
 *
 * The queue's counts are read only when the estimate says the backlog is full, and then at most once
 * per `pollMs`. Where they cannot be read the discovery admits as if unpaced: pacing is a bound on
 * waiting, never a reason to leave a host out.
 */
import type { Clock } from "../ports/clock";
import type { MessageQueue, QueueCounts } from "./use-case-ports";

export interface BacklogPacerOptions {
  queue: Pick<MessageQueue, "counts">;
  clock: Clock;
  /** Measured work kept waiting, in ms; 0 turns pacing off. */
  backlogMs: number;
  /** Hosts always allowed to wait, before any rate is measured. */
  floor: number;
  pollMs: number;
  /** Told when the counts cannot be read (the discovery then admits unpaced). */
  onReadFailure: (error: unknown) => void;
}

export class BacklogPacer {
  private startedAt = 0;
  private initialDepth = 0;
  private admitted = 0;
  /** Hosts whose admission is under way: not in the last read, not yet in `admitted`. */
  private reserved = 0;
  /** Visible plus in flight at the last read: what the finishing rate is measured against. */
  private lastDepth = 0;
  /** Visible at the last read: what the bound applies to. */
  private lastWaiting = 0;
  private admittedAtLastRead = 0;
  private lastReadAt = 0;
  private paced = false;
  /** One wait and read shared by every chunk waiting for room. */
  private pause?: Promise<void>;

  constructor(private readonly options: BacklogPacerOptions) {}

  /** Reads the starting depth; false (and unpaced) when pacing is off or the queue cannot be read. */
  async start(): Promise<boolean> {
    if (this.options.backlogMs <= 0) return false;
    const counts = await this.read();
    if (counts === undefined) return false;
    this.startedAt = this.lastReadAt;
    this.initialDepth = counts.visible + counts.inFlight;
    this.remember(counts);
    this.paced = true;
    return true;
  }

  /**
   * Resolves true once `hosts` more fit the backlog (and counts them as under way), false when
   * `mayWait()` says the invocation has no time left to wait. Unpaced, always true at once.
   */
  async roomFor(hosts: number, mayWait: () => boolean): Promise<boolean> {
    for (;;) {
      if (!this.paced || this.fits(hosts)) {
        this.reserved += hosts;
        return true;
      }
      if (!mayWait()) return false;
      await (this.pause ??= this.waitAndRead().finally(() => (this.pause = undefined)));
    }
  }

  /** The admission of `reservedHosts` reserved by roomFor has ended, `queuedHosts` of them queued. */
  settled(reservedHosts: number, queuedHosts: number): void {
    this.reserved -= reservedHosts;
    this.admitted += queuedHosts;
  }

  /** Hosts allowed to wait now: the measured finishing rate times backlogMs, at least the floor. */
  bound(): number {
    const elapsedMs = this.lastReadAt - this.startedAt;
    const finished = Math.max(0, this.initialDepth + this.admittedAtLastRead - this.lastDepth);
    const measured = elapsedMs > 0 ? Math.floor((finished / elapsedMs) * this.options.backlogMs) : 0;
    return Math.max(this.options.floor, measured);
  }

  private fits(hosts: number): boolean {
    // Work admitted since the last read is counted as still waiting: an over-estimate until the next read.
    const waiting = this.lastWaiting + (this.admitted - this.admittedAtLastRead) + this.reserved;
    return waiting === 0 || waiting + hosts <= this.bound();
  }

  /** Waits out the rest of the poll interval since the last read, then reads the counts again. */
  private async waitAndRead(): Promise<void> {
    const sinceRead = this.options.clock.monotonic() - this.lastReadAt;
    if (sinceRead < this.options.pollMs) await this.options.clock.sleep(this.options.pollMs - sinceRead);
    const counts = await this.read();
    if (counts === undefined) this.paced = false;
    else this.remember(counts);
  }

  private remember(counts: QueueCounts): void {
    this.lastDepth = counts.visible + counts.inFlight;
    this.lastWaiting = counts.visible;
    this.admittedAtLastRead = this.admitted;
  }

  private async read(): Promise<QueueCounts | undefined> {
    try {
      return await this.options.queue.counts();
    } catch (error) {
      this.options.onReadFailure(error);
      return undefined;
    } finally {
      this.lastReadAt = this.options.clock.monotonic();
    }
  }
}
