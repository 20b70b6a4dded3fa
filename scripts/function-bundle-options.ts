/**
 * What serverless.yml says about building the functions, read from a tree's serverless.yml: the
 * esbuild options `custom.esbuild` gives serverless-esbuild and each function's handler file, so the
 * bundle report and the bundle tests build each function exactly as a deployment does (one place to
 * change them: serverless.yml).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { BuildOptions } from "esbuild";
import { parse } from "yaml";

const PASSED_THROUGH = ["bundle", "minify", "keepNames", "sourcemap", "target", "platform", "format", "mainFields"] as const;

interface ServerlessDocument {
  custom?: { esbuild?: Record<string, unknown> };
  functions?: Record<string, { handler?: unknown }>;
}

// serverless.yml's own `${...}` variables live elsewhere; custom.esbuild and the handlers are plain YAML.
async function serverlessDocument(root: string): Promise<ServerlessDocument> {
  return parse(await readFile(join(root, "serverless.yml"), "utf8"), { logLevel: "error" }) as ServerlessDocument;
}

/** serverless.yml function name -> its handler's source file (`handlers/discover.handler` -> `handlers/discover.ts`). */
export async function functionHandlers(root: string): Promise<Record<string, string>> {
  const handlers: Record<string, string> = {};
  for (const [name, fn] of Object.entries((await serverlessDocument(root)).functions ?? {})) {
    const match = typeof fn.handler === "string" ? /^(.+)\.[A-Za-z_$][\w$]*$/.exec(fn.handler) : null;
    if (!match) throw new Error(`${join(root, "serverless.yml")}: function ${name} has no handler of the form <file>.<export>`);
    handlers[name] = `${match[1]}.ts`;
  }
  return handlers;
}

export async function functionBundleOptions(root: string): Promise<BuildOptions> {
  const esbuild = (await serverlessDocument(root)).custom?.esbuild;
  if (!esbuild) throw new Error(`${join(root, "serverless.yml")} has no custom.esbuild`);
  const options: Record<string, unknown> = {};
  for (const key of PASSED_THROUGH) if (esbuild[key] !== undefined) options[key] = esbuild[key];
  return options as BuildOptions;
}
