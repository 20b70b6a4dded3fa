/**
 * Each handler bundles only its own function's composition (docs/architecture.md): `status` and `release`
 * read the lease, the registry and the queues, so their bundles carry no engine, crypto, helper or
 * broker code. Read from esbuild's metafile, built as serverless.yml builds the functions.
 */
import { readdirSync } from "node:fs";
import { resolve } from "node:path";
import { build } from "esbuild";
import { functionBundleOptions } from "../../../scripts/function-bundle-options";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
/**
 * Provisioning code (lib/engine, lib/crypto, lib/helper), the broker client (lib/nats, the
 * envelopes of lib/choria, nats) and the secret stores' and Lambda's clients.
 */
const NOT_IN_OPERATOR_FUNCTIONS =
  /^(lib\/(engine|crypto|helper|nats)\/|lib\/choria\/(envelope|protocol)\.ts$|node_modules\/(nats|@aws-sdk\/client-(ssm|secrets-manager|lambda))\/)/;
/**
 * Facts written once in the engine or crypto and read by the configuration or the registry, which
 * every function loads: a few constants and one rule, no provisioning machinery.
 */
const SHARED_FACTS = new Set([
  // The configuration checks lease.duration against the RPC plan's longest attempt.
  "lib/engine/plan.ts",
  // The registry skips work that waited more than 2 x interval, worded as the engine words it.
  "lib/engine/waiting.ts",
  "lib/engine/go-duration.ts",
  // The default cert_deny_list is the CSR check's.
  "lib/crypto/csr.ts",
]);
const SHARED_FACTS_MAX_BYTES = 2_048;
/**
 * Packages that install a process-wide async hook with destroy tracking when they load: every
 * promise of the container then pays for it (the X-Ray SDK's cls-hooked made an `await` about 14x
 * dearer and took about 8 % of a provision container's main thread in bench:peer's profile).
 */
const PROMISE_TRACKING_HOOKS = /^node_modules\/(cls-hooked|aws-xray-sdk-core|async-hook-jl)\//;
/**
 * zod's locales beyond the English one it falls back to. `import { z } from "zod"` takes the whole
 * namespace object, which holds `z.locales`, so esbuild keeps every locale (about 260 KiB, a
 * quarter of a bundle); `import * as z from "zod"` lets it drop what is not used.
 */
const ZOD_OTHER_LOCALES = /^node_modules\/zod\/v4\/locales\/(?!en\.js$)/;
const HANDLERS = readdirSync(resolve(ROOT, "handlers")).map((name) => `handlers/${name}`);

async function bundledInputs(handler: string): Promise<Array<{ path: string; bytes: number }>> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [resolve(ROOT, handler)],
    ...(await functionBundleOptions(ROOT)),
    write: false,
    outfile: "out.cjs",
    metafile: true,
    logLevel: "silent",
  });
  const output = Object.values(result.metafile.outputs).find((o) => o.entryPoint);
  return Object.entries(output?.inputs ?? {})
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([path, input]) => ({ path, bytes: input.bytesInOutput }));
}

describe("function bundles", () => {
  it.each(["handlers/status.ts", "handlers/release.ts"])("%s carries no engine, crypto, helper, broker or secret store code", async (handler) => {
    const inputs = await bundledInputs(handler);

    const forbidden = inputs.filter(({ path }) => NOT_IN_OPERATOR_FUNCTIONS.test(path));
    expect(forbidden.filter(({ path }) => !SHARED_FACTS.has(path)).map(({ path }) => path)).toEqual([]);
    expect(forbidden.reduce((sum, { bytes }) => sum + bytes, 0)).toBeLessThanOrEqual(SHARED_FACTS_MAX_BYTES);
  });

  it.each(HANDLERS)("%s loads no package that hooks every promise", async (handler) => {
    const inputs = await bundledInputs(handler);

    expect(inputs.filter(({ path }) => PROMISE_TRACKING_HOOKS.test(path)).map(({ path }) => path)).toEqual([]);
  });

  it.each(HANDLERS)("%s carries no zod locale it does not use", async (handler) => {
    const inputs = await bundledInputs(handler);

    expect(inputs.filter(({ path }) => ZOD_OTHER_LOCALES.test(path)).map(({ path }) => path)).toEqual([]);
  });

  it("handlers/provision.ts carries the engine, the helper runners and the broker client", async () => {
    const inputs = await bundledInputs("handlers/provision.ts");

    for (const file of ["lib/engine/provision.ts", "lib/crypto/jwt.ts", "lib/helper/exec-runner.ts", "lib/nats/rpc-client.ts"]) {
      expect(inputs.some(({ path }) => path === file), file).toBe(true);
    }
  });
});
