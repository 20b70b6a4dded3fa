#!/usr/bin/env node
// The operator CLI (`npx choria-provisioner <command>`, lib/operator/cli.ts), run from the TypeScript
// sources through tsx's loader like the repository's other scripts.
import process from "node:process";
import { register } from "tsx/esm/api";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
register();
const { runCli } = await import("../lib/operator/cli.ts");
process.exitCode = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
});
