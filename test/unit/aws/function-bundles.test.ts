/**
 * Each handler bundles only its own function's composition (issue 12): `status` and `release`
 * read the lease, the registry and the queues, so their bundles carry no engine, crypto, helper or
 * broker code. Read from esbuild's metafile, built as serverless.yml builds the functions.
 */
import { resolve } from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
/**
 * Provisioning code (lib/engine, lib/crypto, lib/helper), the broker client (lib/choria's NATS
 * adapters, nats) and the secret stores' clients (SSM, Secrets Manager). lib/engine/plan.ts is the
 * one exception: the configuration checks lease.duration against the RPC plan's longest attempt.
 */
const NOT_IN_OPERATOR_FUNCTIONS =
  /^(lib\/(engine\/(?!plan\.ts$)|crypto\/|helper\/|choria\/(broker|connection|discovery|lifecycle-bridge|protocol|rpc-client)\.ts$)|node_modules\/(nats|@aws-sdk\/client-(ssm|secrets-manager|lambda))\/)/;

async function bundledInputs(handler: string): Promise<string[]> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [resolve(ROOT, handler)],
    bundle: true,
    write: false,
    outfile: "out.cjs",
    platform: "node",
    target: "node22",
    format: "cjs",
    metafile: true,
    logLevel: "silent",
  });
  const output = Object.values(result.metafile.outputs).find((o) => o.entryPoint);
  return Object.entries(output?.inputs ?? {})
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([path]) => path);
}

describe("function bundles", () => {
  it.each(["handlers/status.ts", "handlers/release.ts"])("%s carries no engine, crypto, helper, broker or secret store code", async (handler) => {
    const inputs = await bundledInputs(handler);

    expect(inputs.filter((path) => NOT_IN_OPERATOR_FUNCTIONS.test(path))).toEqual([]);
  });

  it("handlers/provision.ts carries the engine, the helper runners and the broker client", async () => {
    const inputs = await bundledInputs("handlers/provision.ts");

    for (const area of ["lib/engine/", "lib/crypto/", "lib/helper/", "lib/choria/"]) {
      expect(inputs.some((path) => path.startsWith(area)), area).toBe(true);
    }
  });
});
