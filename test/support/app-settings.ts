import { APP_DEFAULTS, type AppSettings } from "../../lib/aws/settings";
import type { LocalResources } from "./aws";

/** App settings for a deployment configured by `yaml` on `resources`; `overrides` holds what a suite sets its own way. */
export function localAppSettings(yaml: string, resources: LocalResources, overrides: Partial<AppSettings> = {}): AppSettings {
  return {
    configEnv: { PROVISIONER_CONFIG_YAML: yaml },
    leaseTable: resources.tables.lease,
    admissionTable: resources.tables.admission,
    hostWorkQueueUrl: resources.queues.hostWork,
    hostWorkDlqUrl: resources.queues.hostWorkDlq,
    lifecycleQueueUrl: resources.queues.lifecycle,
    lifecycleDlqUrl: resources.queues.lifecycleDlq,
    dynamoDbEndpoint: resources.dynamoEndpoint,
    sqsEndpoint: resources.sqsUrl,
    region: "us-east-1",
    lifecycleStream: APP_DEFAULTS.lifecycleStream,
    serviceName: "test",
    metricsNamespace: "Test",
    retryBaseDelaySeconds: 1,
    retryMaxDelaySeconds: 1,
    hostFailureLimit: APP_DEFAULTS.hostFailureLimit,
    keeperRateSeconds: APP_DEFAULTS.keeperRateSeconds,
    deadlineMarginMs: 1_000,
    ...overrides,
  };
}
