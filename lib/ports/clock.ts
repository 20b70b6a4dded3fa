/** The clock port: wall-clock and monotonic time, and sleeping; tests drive the domain with their own. */
export interface Clock {
  /** Wall-clock epoch milliseconds (callers stamping records floor it to whole ms). Deployments' wall clocks may disagree by up to the skew bound. */
  now(): number;
  /** Monotonic milliseconds; only comparable within one process, never across deployments. */
  monotonic(): number;
  sleep(ms: number): Promise<void>;
}

/**
 * The small interfaces the domain logic (provision sequence, lease, admission) is written against.
 * Adapters for NATS, DynamoDB, SQS, Lambda and the wall clock implement them; tests drive the same
 * domain code with real services or with injected clocks.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};
