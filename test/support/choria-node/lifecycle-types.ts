import type { LifecycleType } from "../../../lib/choria/lifecycle";

/** Every lifecycle event type docs/protocol.md §8 names, stated here so tests hold the parser to each of them. */
export const LIFECYCLE_TYPES = ["startup", "shutdown", "provisioned", "alive", "upgraded", "governor"] as const satisfies readonly LifecycleType[];
