/**
 * `renew` (EventBridge schedule, every minute): the leader renews hosts whose credentials expire
 * soon (lib/app/renewal.ts) by sending them reprovision on the main broker (`renew.broker_urls`,
 * `renew.collective`) with the same client credentials and TLS rules as the provisioning broker.
 * It may win a lease term, so it is composed like every broker function (the provisioning broker
 * announces the term); the main broker is a second connection of its own.
 */
import { brokerSettings, choriaClientSettings, natsServers } from "../choria-client";
import { Renewal, unansweredHoldFor, type RenewalRunResult } from "../../app/renewal";
import { RenewCalendar } from "../../config/renew-calendar";
import { ChoriaBroker } from "../../nats/broker";
import { SharedBrokerConnection } from "../../nats/connection";
import { ConfigError } from "../../errors";
import type { BrokerFunctionParts } from "../compose-broker";
import { DynamoDbRenewalStore } from "../../dynamodb/renewal-store";
import { wrapHandler } from "../middleware";
import type { InvocationContext } from "../../app/use-case-ports";

interface RenewFunction {
  /** `not-configured`: no main broker (`renew.broker_urls`), so there is nothing renewal could reach. */
  renew(ctx: InvocationContext): Promise<RenewalRunResult | { status: "not-configured" }>;
  close(): Promise<void>;
}

/** The main broker: `renew.broker_urls`, no provisioning password (that is the provisioning broker's), the target collective. */
async function composeMainBroker({ parts }: BrokerFunctionParts): Promise<ChoriaBroker> {
  const { config, clock, logger } = parts;
  if (config.renew.brokerUrls.length === 0) {
    throw new ConfigError("renew.broker_urls", "is required for renewal: the main broker the provisioned nodes are connected to");
  }
  const settings = await brokerSettings(config, `choria-provisioner renew ${config.deploymentId}`);
  const broker = new ChoriaBroker(
    new SharedBrokerConnection({
      ...settings,
      servers: natsServers(config.renew.brokerUrls),
      provisioningPassword: undefined,
    }),
    { ...(await choriaClientSettings(config, clock, logger)), collective: config.renew.collective },
    { identity: config.identity, discoveryTimeoutMs: config.discoveryTimeoutMs, discoveryMaxNodes: config.discoveryMaxNodes },
    clock,
  );
  parts.closing(() => broker.close());
  return broker;
}

function renewUseCase(composed: BrokerFunctionParts, main: ChoriaBroker): RenewFunction["renew"] {
  const { parts, invocations } = composed;
  const { config, settings } = parts;
  const renewal = new Renewal({
    settings: {
      site: config.site,
      enabled: config.renew.enabled,
      before: config.renew.before,
      ratePerMinute: config.renew.ratePerMinute,
      maxInFlight: config.renew.maxInFlight,
      timeoutMs: config.renew.timeoutMs,
      unansweredHoldMs: unansweredHoldFor(config.intervalMs),
      failureThreshold: config.renew.failureThreshold,
      failureWindow: config.renew.failureWindow,
      calendar: new RenewCalendar(config.renew.windows, config.renew.freezes),
      ...(config.renew.slowStart ? { slowStart: config.renew.slowStart } : {}),
      ...(config.renew.abort ? { abort: config.renew.abort } : {}),
      token: config.token ?? "",
      deadlineMarginMs: settings.deadlineMarginMs,
    },
    gate: parts.gate,
    registry: parts.registry,
    store: new DynamoDbRenewalStore({ client: parts.storeClient, tableName: settings.admissionTable }),
    rpc: main.rpc,
    prepareRpc: () => main.prepareRpc(),
    clock: parts.clock,
    logger: parts.logger,
    metrics: parts.metrics,
  });
  return (ctx) =>
    invocations.run(ctx, async () => {
      try {
        return await renewal.run(ctx);
      } finally {
        // As for the provisioning broker: nothing may stay buffered across a freeze.
        if (await main.closeIfPublishPending().catch(() => false)) {
          parts.logger.warn("closed the main broker connection: a reprovision request was still unconfirmed at the end of the invocation");
        }
      }
    });
}

/**
 * The function on its composed parts: its handler's (handlers/renew.ts) and the whole local stack's.
 * The main broker is a second connection of its own, made only where there is one to reach.
 */
export async function renewFunction(composed: BrokerFunctionParts): Promise<RenewFunction> {
  const { parts } = composed;
  // The schedule runs in every deployment; with renewal off and no main broker it must not fail (and alarm) every minute.
  if (parts.config.renew.brokerUrls.length === 0) {
    return {
      renew: async () => {
        parts.logger.debug("renewal is not configured: renew.broker_urls is empty");
        return { status: "not-configured" };
      },
      close: parts.close,
    };
  }
  const main = await composeMainBroker(composed);
  return { renew: renewUseCase(composed, main), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<RenewFunction>) {
  return wrapHandler(getFunction, (fn, _event: unknown, context) => fn.renew(context));
}

