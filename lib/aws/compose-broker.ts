/**
 * The broker for the functions that reach it: one shared NATS connection per container with the
 * Choria client settings (TLS files or their secrets are read here, once), and the lifecycle event
 * source on that connection. `status` and `release` never import this module.
 */
import type { AdmissionFlow } from "../app/admission-flow";
import { brokerSettings, choriaClientSettings, warnInsecureSigner } from "./choria-client";
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
 * Startup events from the site's lifecycle stream (JetStream) or, without one, core NATS, read on
 * `broker`'s connection (the local real fleet gives it one into go-choria's choria account instead: docs/lifecycle.md).
 */
export function lifecycleEventSource(parts: FunctionParts, broker: Pick<ChoriaBroker, "connection">): LifecycleEventSource {
  const { config, settings } = parts;
  return new NatsLifecycleEventSource(
    {
      stream: settings.lifecycleStream,
      consumer: settings.lifecycleConsumer ?? defaultConsumerName(config.site),
      subject: lifecycleSubject("startup", config.lifecycleComponent),
      replayWindowMs: 2 * config.intervalMs,
    },
    { connection: () => broker.connection(), clock: parts.clock, logger: parts.logger },
  );
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
