/** The operator CLI's process entry: bundled by scripts/build-cli.mjs into dist/, started by bin/choria-provisioner.mjs. */
import process from "node:process";
import { runCli } from "./cli";

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
process.exitCode = await runCli(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
});
