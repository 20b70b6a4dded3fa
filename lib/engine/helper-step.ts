/** The helper step: the configure helper run under the pause gate, its answer kept only inside the window the gate granted. */
import { HelperError, messageOf, PausedError } from "../errors";
import { METRIC } from "../ports/metric-names";
import type { AttemptWindow } from "../ports/lease-gate";
import type { Clock } from "../ports/clock";
import type { HelperRequest, HelperResponse } from "../ports/helper";
import type { HostRun } from "./host-run";
import { HELPER_TIMEOUT_MS } from "./plan";
import { assertGateOpen, assertTimeLeft } from "./retry";

export async function runHelper(run: HostRun, request: HelperRequest): Promise<HelperResponse> {
  const { deps, clock } = run;
  const helperTimeoutMs = deps.settings.helperTimeoutMs ?? HELPER_TIMEOUT_MS;
  assertTimeLeft(run.retry.remainingMs, "the helper", helperTimeoutMs);
  const window = await assertGateOpen(deps.gate, run.work.term, helperTimeoutMs, "the helper");

  const started = clock.monotonic();
  try {
    return await withinWindow(clock, deps.helper.run(request), window);
  } catch (error) {
    if (error instanceof PausedError) throw error;
    deps.metrics.count(METRIC.helperErrors);
    if (error instanceof HelperError) throw error;
    throw new HelperError(`could not invoke configure helper: ${messageOf(error)}`, { cause: error });
  } finally {
    deps.metrics.timing(METRIC.helperTime, (clock.monotonic() - started) / 1000);
  }
}

/**
 * The helper's answer counts only inside the window the gate granted: one that arrives after it
 * (a helper slower than its own timeout, a Lambda helper answering late) is discarded, because
 * the lease it was asked under may have moved on.
 */
async function withinWindow<T>(clock: Clock, work: Promise<T>, window: AttemptWindow): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const closed = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new PausedError(`the helper did not answer inside its lease window; its answer is discarded`)),
      // setTimeout fires at once for delays beyond 2^31 - 1 ms.
      Math.min(Math.max(0, window.endsBy - clock.monotonic()), 2_147_483_647),
    );
  });
  try {
    const answer = await Promise.race([work, closed]);
    // A clock that jumped past the window while the helper ran (a freeze) discards the answer too.
    if (clock.monotonic() > window.endsBy) throw new PausedError("the helper answered after its lease window; its answer is discarded");
    return answer;
  } finally {
    clearTimeout(timer);
    work.catch(() => undefined);
  }
}
