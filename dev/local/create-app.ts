/**
 * The whole stack in one object: every function's use case on one set of parts, for the local
 * stack (dev/local/stack.ts) and the tests that drive several functions of one deployment. Each is
 * the function its deployed handler composes (the `*Function` of lib/aws/functions/*.ts), on parts
 * shared here; the deployed handlers never import this, so their bundles stay per function.
 */
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { DiscoverResult, KeepLeaseResult } from "../../lib/app/leadership";
import type { StatusFunctionReport } from "../../lib/app/operator/functions";
import type { Broker, InvocationContext, LifecycleEventSource } from "../../lib/app/use-case-ports";
import type { AppSettings } from "../../lib/aws/settings";
import { functionUses } from "../../lib/config/secrets";
import type { ProvisionerConfig } from "../../lib/config/types";
import { ProvisionerError } from "../../lib/errors";
import type { ChoriaRpc } from "../../lib/ports/rpc";
import { composeParts, type AppOverrides } from "../../lib/aws/compose";
import { composeBroker, lifecycleEventSource, withBroker } from "../../lib/aws/compose-broker";
import { discoverFunction } from "../../lib/aws/functions/discover";
import { leaseKeeperFunction } from "../../lib/aws/functions/lease-keeper";
import { lifecycleFunction } from "../../lib/aws/functions/lifecycle";
import { provisionFunction } from "../../lib/aws/functions/provision";
import { releaseFunction } from "../../lib/aws/functions/release";
import { renewFunction } from "../../lib/aws/functions/renew";
import { reprovisionFunction } from "../../lib/aws/functions/reprovision";
import { statusFunction } from "../../lib/aws/functions/status";
import { createPowertoolsSecretResolver } from "../../lib/aws/powertools-secrets";

export type { AppOverrides } from "../../lib/aws/compose";

/** What the handlers call: one method per function, each running its use case. */
export interface App {
  readonly config: ProvisionerConfig;
  discover(ctx: InvocationContext): Promise<DiscoverResult>;
  keepLease(ctx: InvocationContext): Promise<KeepLeaseResult>;
  handleLifecycleBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  handleHostWorkBatch(event: SQSEvent, ctx: InvocationContext): Promise<SQSBatchResponse>;
  status(): Promise<StatusFunctionReport>;
  reprovision: ReturnType<typeof reprovisionFunction>["reprovision"];
  release(): Promise<{ released: boolean }>;
  renew: Awaited<ReturnType<typeof renewFunction>>["renew"];
  close(): Promise<void>;
}

/**
 * Every use case on one set of parts. `settings.function`, when set, still limits what is resolved
 * and read to that function's needs (lib/config/secrets.ts): without the broker's settings the
 * broker refuses every use, without the provisioning ones the engine has no token or keys.
 */
export async function createApp(settings: AppSettings, overrides: AppOverrides = {}): Promise<App> {
  const parts = await composeParts(settings, overrides, createPowertoolsSecretResolver);
  const fn = settings.function;
  const usesBroker = functionUses(fn, "tls.key");
  const broker = usesBroker ? await composeBroker(parts) : undefined;
  const composed = withBroker(parts, broker ?? noBroker(fn as string));
  const source: LifecycleEventSource = broker ? await lifecycleEventSource(parts, broker) : { run: () => refuseBroker(fn as string) };
  const app: App = {
    config: parts.config,
    discover: discoverFunction(composed).discover,
    keepLease: leaseKeeperFunction(composed).keepLease,
    handleLifecycleBatch: lifecycleFunction(composed, source).handleLifecycleBatch,
    // The provisioning settings (keys, token) are `provision`'s: `renew` also reads the token, but configures no node.
    handleHostWorkBatch: (await provisionFunction(composed)).handleHostWorkBatch,
    status: statusFunction(parts).status,
    reprovision: reprovisionFunction(composed).reprovision,
    release: releaseFunction(parts).release,
    // As the deployed function: the main broker is a second connection, made only where there is one
    // to reach (`renew.broker_urls`), so a stack with renewal off never dials it and answers `not-configured`.
    renew: usesBroker ? (await renewFunction(composed)).renew : async () => ({ status: "not-configured" }),
    close: parts.close,
  };
  const { config } = parts;
  parts.logger.info("provisioner app ready", { site: config.site, deploymentId: config.deploymentId, leaderElection: config.leaderElection });
  return app;
}

async function refuseBroker(fn: string): Promise<never> {
  throw new ProvisionerError(`the ${fn} function does not connect to the broker`);
}

/** The broker of a function that never connects: any use is a wiring mistake, named as such. */
function noBroker(fn: string): Broker & { rpc: ChoriaRpc } {
  const refuse = () => refuseBroker(fn);
  return {
    rpc: { call: refuse },
    discover: refuse,
    prepareRpc: refuse,
    publishStartup: refuse,
    // Asked after every invocation: nothing was ever sent.
    closeIfPublishPending: async () => false,
    close: async () => undefined,
  };
}
