export { createAppLeaseGate, type AppLeaseGateDeps, type AppOverrides, type FunctionParts } from "./compose";
export { defaultConsumerName } from "./compose-broker";
export { lazyFunction, powertoolsRuntime, tracingEnabled, type PowertoolsRuntime } from "./runtime";
