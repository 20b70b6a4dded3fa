/**
 * The broker for the functions that reach it: one shared NATS connection per container with the
 * Choria client settings (TLS files or their secrets are read here, once), and the lifecycle event
 * source on that connection. `status` and `release` never import this module.
 */
import type { AdmissionFlow } from "../app/admission-flow";
import { brokerSettings, choriaClientSettings, natsServers, warnInsecureSigner } from "./choria-client";
import type { Invocations } from "../app/invocation";
import type { Leadership } from "../app/leadership";
import type { Broker, LifecycleEventSource } from "../app/use-case-ports";
import { ChoriaBroker } from "../nats/broker";
import { SharedBrokerConnection } from "../nats/connection";
import { lifecycleSubject } from "../choria/lifecycle";
import { defaultConsumerName, NatsLifecycleEventSource } from "../nats/lifecycle-event-source";
import type { ChoriaRpc } from "../ports/rpc";
import { admissionFlow, composeInvocations, composeLeadership, type FunctionParts } from "./compose";

export async function composeBroker(parts: FunctionParts): Promise<ChoriaBroker> {
  const { config, clock, logger } = parts;
  warnInsecureSigner(config, logger);
  const broker = new ChoriaBroker(
    new SharedBrokerConnection(await brokerSettings(config, `choria-provisioner ${config.deploymentId}`)),
    await choriaClientSettings(config, clock, logger),
    { identity: config.identity, discoveryTimeoutMs: config.discoveryTimeoutMs, discoveryMaxNodes: config.discoveryMaxNodes },
    clock,
  );
  parts.closing(() => broker.close());
  return broker;
}

/**
 * Startup events from the site's lifecycle stream (JetStream) or, without one, core NATS. Read on
 * `broker`'s connection, or, with `lifecycle_broker_urls`, on one of their own with the TLS client
 * certificate only: go-choria keeps the events in its choria account's CHORIA_EVENTS stream, which
 * the provisioning account cannot reach (docs/lifecycle.md).
 */
export async function lifecycleEventSource(parts: FunctionParts, broker: Pick<ChoriaBroker, "connection">): Promise<LifecycleEventSource> {
  const { config, settings } = parts;
  const reader = config.lifecycleBrokerUrls.length > 0 ? await streamConnection(parts) : broker;
  return new NatsLifecycleEventSource(
    {
      stream: settings.lifecycleStream,
      consumer: settings.lifecycleConsumer ?? defaultConsumerName(config.site),
      subject: lifecycleSubject("startup", config.lifecycleComponent),
      replayWindowMs: 2 * config.intervalMs,
    },
    { connection: () => reader.connection(), clock: parts.clock, logger: parts.logger },
  );
}

/** The connection to `lifecycle_broker_urls`, closed with the container. */
async function streamConnection(parts: FunctionParts): Promise<Pick<ChoriaBroker, "connection">> {
  const { config } = parts;
  const settings = await brokerSettings(config, `choria-provisioner lifecycle ${config.deploymentId}`);
  // The TLS client certificate alone: go-choria places a verified client with no JWT and no password
  // in its choria account; the provisioner's client JWT (--server-provisioner) is refused there.
  const connection = new SharedBrokerConnection({
    ...settings,
    servers: natsServers(config.lifecycleBrokerUrls),
    provisioningPassword: undefined,
    token: undefined,
    signNonce: undefined,
  });
  parts.closing(() => connection.close());
  return { connection: () => connection.get() };
}

/** What every function that reaches the broker is built from, on top of the shared parts. */
export interface BrokerFunctionParts {
  parts: FunctionParts;
  broker: Broker & { rpc: ChoriaRpc };
  admission: AdmissionFlow;
  leadership: Leadership;
  invocations: Invocations;
}

/** Admission, leadership and the invocation wrapper on `broker`. */
export function withBroker<B extends Broker & { rpc: ChoriaRpc }>(parts: FunctionParts, broker: B): BrokerFunctionParts & { broker: B } {
  const admission = admissionFlow(parts);
  return {
    parts,
    broker,
    admission,
    leadership: composeLeadership(parts, broker, admission),
    invocations: composeInvocations(parts, broker),
  };
}
