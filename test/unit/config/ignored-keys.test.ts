/**
 * Go keys this build accepts and does not act on are said to have no effect, with what happens
 * instead: at start-up as a warning, in check-config as a warning line. Before, nothing was said,
 * and a Go operator could think rego_policy was enforced. A setting that weakens the deployment
 * (not verifying the broker's certificate) is warned about the same way.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { SETTINGS } from "../../../lib/config/keys";
import { checkDeploymentConfig } from "../../../lib/config/deploy-check";
import { createConsoleLogger } from "../../../dev/local/console-logger";

const MINIMAL = { helper: "/usr/local/bin/helper", broker_urls: ["nats://b.example.net:4222"] };
const SET = { logfile: "/var/log/choria-provisioner.log", monitor_port: 8080, broker_port: 4222, rego_policy: "/etc/choria/provisioner.rego" };

function warningsOf(document: Record<string, unknown>): Array<{ message: string; setting: string; detail: string }> {
  const lines: string[] = [];
  parseConfig(document, { env: {}, logger: createConsoleLogger({ level: "debug", write: (line) => lines.push(line) }) });
  return lines.map((line) => JSON.parse(line) as { level: string; message: string; setting: string; detail: string }).filter((record) => record.level === "WARN");
}

describe("keys accepted and ignored", () => {
  it("are the Go keys with no effect here", () => {
    // Assert
    expect(SETTINGS.filter(([, spec]) => spec.ignored).map(([name]) => name).sort()).toEqual(Object.keys(SET).sort());
  });

  it("each get a start-up warning saying what happens instead", () => {
    // Act
    const warnings = warningsOf({ ...MINIMAL, ...SET });

    // Assert
    expect(warnings.map((warning) => warning.setting).sort()).toEqual(Object.keys(SET).sort());
    for (const warning of warnings) expect(warning.message).toBe("configuration key has no effect in the serverless provisioner");
    const byKey = Object.fromEntries(warnings.map((warning) => [warning.setting, warning.detail]));
    expect(byKey.rego_policy).toMatch(/no policy is enforced.*broker's provisioning account.*AWS IAM/);
    expect(byKey.monitor_port).toMatch(/CloudWatch/);
    expect(byKey.logfile).toMatch(/CloudWatch Logs/);
  });

  it("say nothing when left at their zero value", () => {
    // Act
    const warnings = warningsOf({ ...MINIMAL, logfile: "", monitor_port: 0, broker_port: 0 });

    // Assert
    expect(warnings).toEqual([]);
  });

  it("get a check-config warning each", () => {
    // Act
    const result = checkDeploymentConfig(
      ["helper_function: helper", "broker_urls: [nats://b.example.net:4222]", "rego_policy: /etc/choria/provisioner.rego", "monitor_port: 8080"].join("\n"),
    );

    // Assert
    expect(result.errors).toEqual([]);
    expect(result.warnings).toEqual([
      { key: "monitor_port", message: expect.stringMatching(/^configuration key has no effect in the serverless provisioner: no Prometheus listener/) },
      { key: "rego_policy", message: expect.stringMatching(/^configuration key has no effect in the serverless provisioner: no policy is enforced/) },
    ]);
  });

  it("name the key in the log line, which the credential masking leaves alone (unknown keys too)", () => {
    // Act
    const warnings = warningsOf({ ...MINIMAL, rego_policy: "/etc/choria/provisioner.rego", flavour: "mint" });

    // Assert
    expect(warnings.map((warning) => warning.setting)).toEqual(["flavour", "rego_policy"]);
  });
});

describe("settings that weaken the deployment", () => {
  it("tls.insecure_skip_verify: true is accepted with a warning at start and in check-config", () => {
    // Act
    const warnings = warningsOf({ ...MINIMAL, tls: { insecure_skip_verify: true } });
    const result = checkDeploymentConfig(["helper_function: helper", "broker_urls: [tls://b.example.net:4222]", "tls:", "  insecure_skip_verify: true"].join("\n"));

    // Assert
    expect(warnings).toEqual([expect.objectContaining({ setting: "tls.insecure_skip_verify", detail: expect.stringMatching(/pose as the broker/) })]);
    expect(result.warnings).toEqual([{ key: "tls.insecure_skip_verify", message: expect.stringMatching(/^the broker's TLS certificate is not verified: /) }]);
  });
});
