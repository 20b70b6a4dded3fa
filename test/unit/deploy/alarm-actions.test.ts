/**
 * Package time (config/deployment.cjs, the resolver serverless.yml calls): a stack packaged without
 * `alarmTopicArn` is told, in one line, that its alarms notify nobody; with one it hears nothing. A
 * raw `sls invoke local` without the queue params is pointed at scripts/sls-local.sh.
 */
import { createRequire } from "node:module";
import { resolve } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";

const require = createRequire(import.meta.url);
const resolver = require("../../../config/deployment.cjs") as (api: { resolveVariable: (name: string) => Promise<string> }) => Promise<{ alarmActions: string[] }>;
const ROOT = resolve(import.meta.dirname, "../../..");

async function packageWith(params: Record<string, string>) {
  const warnings: string[] = [];
  vi.spyOn(console, "warn").mockImplementation((text: string) => void warnings.push(text));
  const cwd = vi.spyOn(process, "cwd").mockReturnValue(ROOT);
  const values: Record<string, string> = { "self:service": "choria-provisioner", "sls:stage": "prod", "self:provider.region": "eu-west-1", ...params };
  const resolved = await resolver({
    resolveVariable: async (expression) => {
      const [name, fallback] = expression.split(/,\s*/);
      const key = (name ?? "").replace(/^param:/, "");
      return values[key] ?? values[name ?? ""] ?? (fallback ?? "").replace(/^'|'$/g, "");
    },
  });
  cwd.mockRestore();
  return { resolved, warnings };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("alarm actions at package time", () => {
  it("says the alarms notify nobody when alarmTopicArn is not set", async () => {
    const { resolved, warnings } = await packageWith({});

    expect(resolved.alarmActions).toEqual([]);
    expect(warnings.filter((line) => line.includes("alarmTopicArn"))).toEqual([
      "note: param alarmTopicArn is not set: the stack's alarms are created without actions and notify nobody; pass --param alarmTopicArn=<SNS topic ARN>",
    ]);
  }, 60_000);

  it("is quiet about alarms when a topic is given", async () => {
    const topic = "arn:aws:sns:eu-west-1:123456789012:oncall";
    const { resolved, warnings } = await packageWith({ alarmTopicArn: topic });

    expect(resolved.alarmActions).toEqual([topic]);
    expect(warnings.filter((line) => line.includes("alarmTopicArn"))).toEqual([]);
  }, 60_000);

  it("points a raw sls invoke local without the queue params at scripts/sls-local.sh", async () => {
    const argv = process.argv;
    process.argv = [argv[0] ?? "node", "sls", "invoke", "local", "-f", "status"];
    try {
      await expect(packageWith({})).rejects.toThrow(/sls invoke local needs the queues as params .*run scripts\/sls-local.sh <function>/);
      await expect(packageWith({ hostWorkQueueUrl: "http://127.0.0.1:4566/000000000000/q" })).resolves.toMatchObject({ warnings: [] });
    } finally {
      process.argv = argv;
    }
  }, 60_000);
});
