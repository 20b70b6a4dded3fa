/** The discovery window: it ends a fixed time after the broadcast, or sooner once replies stop, as Go's does. */

export interface TimerHandle {
  cancel(): void;
}

/** The one timer primitive the sliding window needs; injectable so unit tests control time. */
export interface Scheduler {
  schedule(delayMs: number, callback: () => void): TimerHandle;
}

export const realScheduler: Scheduler = {
  schedule(delayMs, callback) {
    const timer = setTimeout(callback, delayMs);
    return { cancel: () => clearTimeout(timer) };
  },
};

/**
 * Ends `done` when no reply arrived for `idleMs` after the latest one, or `capMs` after start,
 * whichever is first. Like Go's window, the first reply swaps the initial timer for the idle one.
 */
export class SlidingWindow {
  readonly done: Promise<void>;
  private finish!: () => void;
  private idle: TimerHandle | undefined;
  private readonly cap: TimerHandle;
  private closed = false;

  constructor(
    private readonly scheduler: Scheduler,
    capMs: number,
    private readonly idleMs: number,
  ) {
    this.done = new Promise((resolve) => (this.finish = resolve));
    this.cap = scheduler.schedule(capMs, () => this.close());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Restarts the idle timer; ignored once the window has closed. */
  touch(): void {
    if (this.closed) return;
    this.idle?.cancel();
    this.idle = this.scheduler.schedule(this.idleMs, () => this.close());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.idle?.cancel();
    this.cap.cancel();
    this.finish();
  }
}
