/**
 * The esbuild options serverless.yml's `custom.esbuild` gives serverless-esbuild, read from a tree's
 * serverless.yml, so the bundle report and the bundle tests build each function exactly as a
 * deployment does (one place to change them: serverless.yml).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { BuildOptions } from "esbuild";
import { parse } from "yaml";

const PASSED_THROUGH = ["bundle", "minify", "keepNames", "sourcemap", "target", "platform", "format", "mainFields"] as const;

export async function functionBundleOptions(root: string): Promise<BuildOptions> {
  // serverless.yml's own `${...}` variables live elsewhere; custom.esbuild is plain YAML.
  const document = parse(await readFile(join(root, "serverless.yml"), "utf8"), { logLevel: "error" }) as {
    custom?: { esbuild?: Record<string, unknown> };
  };
  const esbuild = document.custom?.esbuild;
  if (!esbuild) throw new Error(`${join(root, "serverless.yml")} has no custom.esbuild`);
  const options: Record<string, unknown> = {};
  for (const key of PASSED_THROUGH) if (esbuild[key] !== undefined) options[key] = esbuild[key];
  return options as BuildOptions;
}
