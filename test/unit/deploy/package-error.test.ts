/**
 * A configuration that cannot be deployed fails `sls package` with our error first: printed before
 * osls's own report, and handed to osls without a stack (osls prints the stack it is given, eleven
 * frames of its internals that buried the problem).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

const require = createRequire(import.meta.url);
const resolveDeployment = require("../../../config/deployment.cjs") as (context: { resolveVariable: (name: string) => Promise<unknown> }) => Promise<unknown>;

/** What osls resolves for the file: the config path given, fixed names, and each param's default. */
function variables(configPath: string) {
  const fixed: Record<string, string> = { "self:service": "choria-provisioner", "sls:stage": "test", "self:provider.region": "eu-west-1" };
  return async (name: string): Promise<unknown> => {
    if (name.startsWith("param:provisionerConfig")) return configPath;
    if (name in fixed) return fixed[name];
    return /, '(.*)'$/.exec(name)?.[1] ?? "";
  };
}

describe("a configuration that cannot be deployed, at package time", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "package-error-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("is printed first, every problem, and given to osls as one line without a stack", async () => {
    // Arrange
    const file = join(dir, "bad.yaml");
    await writeFile(file, "site: lon\nhelper_function: helper\nbroker_urls: [nats://b.example.net:4222]\ninterval: 10s\nworkers: -1\n");
    const printed: string[] = [];
    const spy = vi.spyOn(console, "error").mockImplementation((text: unknown) => void printed.push(String(text)));

    // Act
    const error = await resolveDeployment({ resolveVariable: variables(file) }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    spy.mockRestore();

    // Assert
    expect(printed).toHaveLength(1);
    const lines = (printed[0] ?? "").split("\n");
    expect(lines[0]).toBe(`error: ${file} cannot be deployed (npm run check-config -- ${file}):`);
    expect(lines.slice(1)).toEqual(["  workers: must be at least 0 hosts; got -1 hosts", '  interval: must be at least 1m (for example 1m, 5m or 1h); got "10s"']);
    expect(error?.message).toBe(`${file} cannot be deployed (npm run check-config -- ${file}): (printed above)`);
    expect(error?.stack).toBe(error?.message);
  }, 60_000);

  it("leaves osls's own errors to osls", async () => {
    // Arrange
    const waiting = Object.assign(new Error("depends on a variable not resolved yet"), { code: "MISSING_VARIABLE_DEPENDENCY" });
    const spy = vi.spyOn(console, "error").mockImplementation(() => undefined);

    // Act
    const error = await resolveDeployment({
      resolveVariable: async () => {
        throw waiting;
      },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const printed = spy.mock.calls.length;
    spy.mockRestore();

    // Assert
    expect(error).toBe(waiting);
    expect(printed).toBe(0);
  });
});
