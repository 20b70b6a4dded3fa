/** Operator (sls invoke -f status): this deployment's role, lease holder and term, queue depths, registry counts and last errors, credentials and renewal. */
export { handler, makeHandler } from "../lib/aws/functions/status";
