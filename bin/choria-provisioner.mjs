#!/usr/bin/env node
// The operator CLI (cli/cli.ts), run from its bundle with plain node, no TypeScript loader. The
// bundle is in the tarball `npm pack` makes (what operators install, docs/operations.md); in a
// checkout `npm run build:cli` (or `npm run build`, `npm test`) makes it.
import module from "node:module";
import process from "node:process";

// The bundle is one 0.7 MB module: V8's compile cache (kept in the OS temp directory) spares every
// run after the first most of its parse and compile time.
module.enableCompileCache?.();
try {
  await import("../dist/choria-provisioner.mjs");
} catch (error) {
  if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes("dist/choria-provisioner.mjs")) throw error;
  process.stderr.write(
    "choria-provisioner: the CLI is not built: in a checkout, run npm run build:cli; to install it, use the tarball npm pack makes (docs/operations.md)\n",
  );
  process.exitCode = 1;
}
