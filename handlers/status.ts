/** Operator (sls invoke -f status): this deployment's role, lease holder and term, queue depths, registry counts and last errors, credentials and renewal. */
import { partsFunction } from "../lib/aws/compose";
import { statusFunction, makeHandler } from "../lib/aws/functions/status";
import { lazyFunction } from "../lib/aws/runtime";

export { makeHandler };
export const handler = makeHandler(lazyFunction(partsFunction("status", statusFunction)));
