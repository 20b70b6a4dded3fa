export { retryDelaySeconds } from "./host-work";
export { decodeHostWork, encodeHostWork } from "./host-work-message";
export type { StatusReport } from "./operator";
