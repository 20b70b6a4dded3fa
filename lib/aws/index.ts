export { createAppLeaseGate } from "./compose";
export { defaultConsumerName } from "./compose-broker";
