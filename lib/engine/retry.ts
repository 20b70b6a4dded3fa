/**
 * Retries of one Choria RPC the way the Go provisioner's `rpcWrapper` does them: the "FiveSec"
 * backoff between attempts, the pause gate read before the loop and before every attempt, the
 * per-attempt timing and the per-call error count. Added here: an invocation deadline, so an
 * attempt (or a backoff sleep) that could not finish inside the Lambda's remaining time is not
 * started and the work goes back to the queue instead.
 */
import { AttemptExceedsLeaseError, PausedError } from "../errors";
import { METRIC } from "../ports/metric-names";
import type { AttemptWindow, PauseGate } from "../ports/lease-gate";
import type { Clock } from "../ports/clock";
import type { Logger } from "../ports/logger";
import type { Metrics } from "../ports/metrics";
import { OutOfTimeError, RpcRetriesExhaustedError } from "./errors";

/** Go `backoff.FiveSec`: base sleeps in ms; the sleep after try n uses index min(n, 10). */
const FIVE_SEC_BACKOFF_MS = [500, 750, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000] as const;

/** A number in [0, 1), like Math.random; injected so tests are deterministic. */
export type RandomSource = () => number;

/**
 * The sleep after the `afterTry`-th failed attempt (1-based, as Go counts): the base for that index,
 * jittered uniformly into [base/2, 1.5·base) whole milliseconds.
 */
function backoffDelayMs(afterTry: number, random: RandomSource = Math.random): number {
  const index = Math.min(Math.max(Math.trunc(afterTry), 0), FIVE_SEC_BACKOFF_MS.length - 1);
  const base = FIVE_SEC_BACKOFF_MS[index] as number;
  return Math.floor(base / 2) + Math.floor(random() * base);
}

/** Remaining invocation time in ms (Lambda `getRemainingTimeInMillis` minus a safety margin). */
export type RemainingTime = () => number;

/** Throws OutOfTimeError unless `neededMs` fits in the remaining invocation time. */
export function assertTimeLeft(remainingMs: RemainingTime | undefined, what: string, neededMs: number): void {
  if (remainingMs === undefined) return;
  const remaining = remainingMs();
  if (remaining < neededMs) throw new OutOfTimeError(what, neededMs, remaining);
}

/**
 * Reads the pause gate for an action lasting `actionMs` and returns the window it grants.
 * Whatever stops the gate from opening is a PausedError (or AttemptExceedsLeaseError, which no
 * wait can cure), so callers never act on a gate they could not read.
 */
export async function assertGateOpen(gate: PauseGate, term: number, actionMs: number, what: string): Promise<AttemptWindow> {
  try {
    return await gate.assertOpen(term, actionMs);
  } catch (error) {
    if (error instanceof PausedError || error instanceof AttemptExceedsLeaseError) throw error;
    throw new PausedError(`provisioning is paused, cannot perform ${what}: the pause gate could not be read`, { cause: error });
  }
}

/** What every retried call of one host's sequence shares. */
export interface RetryContext {
  gate: PauseGate;
  /** Lease term the work was admitted under. */
  term: number;
  clock: Clock;
  metrics: Metrics;
  logger: Logger;
  random?: RandomSource;
  remainingMs?: RemainingTime;
}

export interface RetriedCall<T> extends RetryContext {
  /** Target node identity. */
  identity: string;
  /** `agent#action`: the metric label and log name. */
  rpc: string;
  tries: number;
  attemptTimeoutMs: number;
  /** One attempt inside the window the gate granted; throwing makes it a failed attempt that is retried while tries remain. */
  call: (tryNumber: number, window: AttemptWindow) => Promise<T>;
}

/**
 * Runs `call` up to `tries` times. Throws PausedError (or LeaseLostError) when the gate is closed
 * before the loop or before any attempt, OutOfTimeError when the next attempt cannot finish in
 * time, and RpcRetriesExhaustedError (cause = last error) when every attempt failed.
 * `rpc_time` is observed per attempt; `rpc_errors` is counted once per failed call, as in Go, and
 * not at all when the gate was closed before the loop.
 */
export async function rpcWithRetries<T>(options: RetriedCall<T>): Promise<T> {
  const { identity, rpc, tries, attemptTimeoutMs, term, clock, metrics, logger } = options;
  const random = options.random ?? Math.random;
  const labels = { rpc };
  const logAttributes = { identity, term, rpc };

  await assertGateOpen(options.gate, term, attemptTimeoutMs, rpc);

  try {
    let lastError: unknown;
    for (let tryNumber = 1; tryNumber <= tries; tryNumber++) {
      assertTimeLeft(options.remainingMs, `${rpc} try ${tryNumber}`, attemptTimeoutMs);
      const window = await assertGateOpen(options.gate, term, attemptTimeoutMs, rpc);

      logger.debug(`Trying action ${rpc} try ${tryNumber}/${tries}`, logAttributes);
      const started = clock.monotonic();
      try {
        return await options.call(tryNumber, window);
      } catch (error) {
        lastError = error;
        logger.error(`rpc handler for ${rpc} failed`, { ...logAttributes, try: tryNumber, error });
      } finally {
        metrics.timing(METRIC.rpcTime, (clock.monotonic() - started) / 1000, labels);
      }

      if (tryNumber < tries) {
        const delayMs = backoffDelayMs(tryNumber, random);
        assertTimeLeft(options.remainingMs, `backoff and ${rpc} try ${tryNumber + 1}`, delayMs + attemptTimeoutMs);
        await clock.sleep(delayMs);
      }
    }
    logger.error(`Maximum ${tries} tries reached for action ${rpc}`, { ...logAttributes, error: lastError });
    throw new RpcRetriesExhaustedError(identity, rpc, tries, lastError);
  } catch (error) {
    metrics.count(METRIC.rpcErrors, 1, labels);
    throw error;
  }
}
