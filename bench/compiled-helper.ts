/**
 * Builds bench/helpers/compiled (a Go program making the same decision as the bash + jq helper)
 * with the machine's Go, so both provisioners can be measured with a helper that costs about a
 * millisecond. Standard library only: no module download. The binary is cached by the source's hash.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const SOURCE_DIR = resolve(fileURLToPath(new URL("helpers/compiled", import.meta.url)));

export class CompiledHelperBuildError extends Error {}

/** The path of the built helper, or a CompiledHelperBuildError saying why Go could not build it. */
export function buildCompiledHelper(): string {
  const hash = createHash("sha256");
  for (const file of ["go.mod", "main.go"]) hash.update(readFileSync(join(SOURCE_DIR, file)));
  const output = join(tmpdir(), `choria-bench-helper-${hash.digest("hex").slice(0, 12)}`);
  if (existsSync(output)) return output;
  const build = spawnSync("go", ["build", "-trimpath", "-o", output, "."], {
    cwd: SOURCE_DIR,
    encoding: "utf8",
    env: { ...process.env, CGO_ENABLED: "0", GOFLAGS: "-mod=mod" },
  });
  if (build.error) throw new CompiledHelperBuildError(`could not run go to build ${SOURCE_DIR}: ${build.error.message}`, { cause: build.error });
  if (build.status !== 0) throw new CompiledHelperBuildError(`go build of ${SOURCE_DIR} failed (${build.status}): ${build.stderr.trim()}`);
  return output;
}
