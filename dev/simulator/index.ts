/**
 * Fleet simulator of Choria Servers in provisioning mode: see fleet.ts for the NATS side
 * and node.ts for one server's behaviour.
 */
export { startFleet, type Fleet, type FleetOptions, type PublishedLifecycleEvent } from "./fleet";
export { type MalformedLayer, type NodeFaults, type ProvisioningJwtFault, type RpcSelector } from "./faults";
export {
  AGENT_TIMEOUT_MS,
  DEFAULT_CONFIG_FILE,
  LOCK_WINDOW_MS,
  PROVISION_MODE_COMPONENT,
  PROVISIONING_AGENTS,
  PROVISIONING_COLLECTIVE,
  SimulatedNode,
  type NodeEnvironment,
  type NodeFiles,
  type NodeOptions,
  type NodeReply,
  type RpcRecord,
} from "./node";
export { RsaKeyPool, type RsaKeyPoolOptions } from "./rsa-pool";
export { encodeNodeReplies, type ReplyContext } from "./wire";
