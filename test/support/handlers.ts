import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { AppSettings } from "../../lib/aws/settings";
import { createApp, type App } from "../../dev/local/create-app";
import { InMemoryMetrics } from "./in-memory-metrics";
import { silentLogger, type Logger } from "../../lib/ports/logger";
import type { Clock } from "../../lib/ports/clock";
import { localAppSettings } from "./app-settings";
import type { LocalResources } from "./aws";

export const HELPER = "node examples/helpers/provision-helper.mjs";
/** The provisioning token of the fleet and of every deployment. */
export const TOKEN = "handlers-provisioning-token";

export interface DeploymentOptions {
  deploymentId: string;
  site: string;
  natsUrl: string;
  /** The deployment's queues and tables (tables may be shared with another deployment of the site). */
  resources: LocalResources;
  extraYaml?: string;
  clock?: Clock;
  /** Default the example helper. */
  helper?: string;
  /** Default silent. */
  logger?: Logger;
}

export interface Deployment {
  app: App;
  metrics: InMemoryMetrics;
  settings: AppSettings;
}

export async function startDeployment(options: DeploymentOptions): Promise<Deployment> {
  const yaml = [
    `site: ${options.site}`,
    `deployment_id: ${options.deploymentId}`,
    `helper: ${options.helper ?? HELPER}`,
    `token: ${TOKEN}`,
    "choria_insecure: true",
    "leader_election: true",
    "workers: 4",
    `broker_urls: ["${options.natsUrl}"]`,
    options.extraYaml ?? "",
  ].join("\n");
  const settings = localAppSettings(yaml, options.resources, { retryMaxDelaySeconds: 2 });

  const metrics = new InMemoryMetrics(options.site);
  const app = await createApp(settings, { metrics, logger: options.logger ?? silentLogger, ...(options.clock ? { clock: options.clock } : {}) });
  return { app, metrics, settings };
}

export async function send(client: SQSClient, queueUrl: string, body: string): Promise<void> {
  await client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
}
