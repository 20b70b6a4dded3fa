export { retryDelaySeconds } from "./host-work";
export { decodeHostWork, encodeHostWork } from "./host-work-message";
export type { StatusFunctionReport } from "./operator/functions";
