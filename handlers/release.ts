/** Operator: gives up this deployment's lease so a standby takes over without waiting for expiry. */
import { partsFunction } from "../lib/aws/compose";
import { releaseFunction, makeHandler } from "../lib/aws/functions/release";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(partsFunction("release", releaseFunction)));
