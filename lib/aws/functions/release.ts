/** `release` (operator): gives up this deployment's lease so a standby takes over without waiting for expiry. */
import { release } from "../../app/operator/functions";
import type { AppSettings } from "../settings";
import { composeParts, functionSettings, type AppOverrides, type FunctionParts } from "../compose";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface ReleaseFunction {
  release(): Promise<{ released: boolean }>;
  close(): Promise<void>;
}

export function releaseUseCase(parts: FunctionParts): ReleaseFunction["release"] {
  // The gate releases the term it holds or, in a container that never held it, the stored one.
  return () =>
    release({ leaderElection: parts.config.leaderElection && parts.leaseStore !== undefined, release: () => parts.gate.release(), logger: parts.logger });
}

/** Writes the lease only: no broker, no engine, no key or TLS file, no secret. */
export async function composeRelease(settings: AppSettings, overrides: AppOverrides = {}): Promise<ReleaseFunction> {
  const parts = await composeParts(functionSettings(settings, "release"), overrides);
  return { release: releaseUseCase(parts), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<ReleaseFunction>) {
  return wrapHandler(getFunction, (fn) => fn.release());
}

export const handler = makeHandler(lazyFunction(composeRelease));
