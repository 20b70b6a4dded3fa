#!/usr/bin/env node
// The operator CLI (`npx choria-provisioner <command>`, cli/cli.ts), run from its bundle
// (npm run build:cli, which `npm install` runs as prepare): plain node, no TypeScript loader.
import process from "node:process";

try {
  await import("../dist/choria-provisioner.mjs");
} catch (error) {
  if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes("dist/choria-provisioner.mjs")) throw error;
  process.stderr.write("choria-provisioner: the CLI is not built: run npm run build:cli in the package's directory\n");
  process.exitCode = 1;
}
