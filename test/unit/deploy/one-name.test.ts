/**
 * The stack's metric namespace and service name are written once for the template
 * (config/deployment.cjs, which serverless.yml's environment and alarms read) and once for the
 * code's defaults: the two must agree, or the alarms watch metrics nobody emits.
 */
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { APP_DEFAULTS } from "../../../lib/aws/settings";

const require = createRequire(import.meta.url);
const deployment = require("../../../config/deployment.cjs") as { NAMESPACE: string; SERVICE_DIMENSION: string };

describe("the names the template and the functions share", () => {
  it("are the same metric namespace and service name", () => {
    expect(deployment.NAMESPACE).toBe(APP_DEFAULTS.metricsNamespace);
    expect(deployment.SERVICE_DIMENSION).toBe(APP_DEFAULTS.serviceName);
  });
});
