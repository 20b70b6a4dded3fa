/**
 * Fleet simulator of Choria Servers in provisioning mode: see fleet.ts for the NATS side
 * and node.ts for one server's behaviour.
 */
export { startFleet, type Fleet, type FleetOptions } from "./fleet";
export { type NodeFaults, type ProvisioningJwtFault } from "./faults";
export { LOCK_WINDOW_MS, SimulatedNode, type NodeOptions, type RpcRecord } from "./node";
export { encodeNodeReplies } from "./wire";
