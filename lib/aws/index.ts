export { createAppLeaseGate, type AppOverrides } from "./compose";
export { defaultConsumerName } from "./compose-broker";
export { createApp, type App } from "./create-app";
