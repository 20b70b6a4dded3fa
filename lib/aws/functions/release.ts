/** `release` (operator): gives up this deployment's lease so a standby takes over without waiting for expiry. */
import { release } from "../../app/operator/functions";
import type { FunctionParts } from "../compose";
import { wrapHandler } from "../middleware";

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface ReleaseFunction {
  release(): Promise<{ released: boolean }>;
  close(): Promise<void>;
}

/**
 * The function on its composed parts: its handler's (handlers/release.ts) and the whole local
 * stack's. Writes the lease only: no broker, no engine, no key or TLS file, no secret.
 */
export function releaseFunction(parts: FunctionParts): ReleaseFunction {
  // The gate releases the term it holds or, in a container that never held it, the stored one.
  const leaderElection = parts.config.leaderElection && parts.leaseStore !== undefined;
  return { release: () => release({ leaderElection, release: () => parts.gate.release(), logger: parts.logger }), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<ReleaseFunction>) {
  return wrapHandler(getFunction, (fn) => fn.release());
}
