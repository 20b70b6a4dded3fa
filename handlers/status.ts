/** Operator (sls invoke -f status): lease holder and term, queue depths, registry counts and last errors. */
export { handler, makeHandler } from "../lib/aws/functions/status";
