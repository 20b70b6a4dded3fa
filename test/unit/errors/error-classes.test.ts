/**
 * Every error class of lib/ and dev/ is rooted in ProvisionerError (so `messageOf`, the handlers'
 * failure mapping and the CLI treat them as ours), and no production path in lib/ throws a bare
 * Error that names no kind of failure. Read from the source, as the layer test reads imports.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");

function sources(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts") && !path.endsWith(".d.ts"))
    .map((path) => join(ROOT, folder, path));
}

/** Each class declared in the sources, with the class it extends. */
function classes(files: string[]): Map<string, { base: string; file: string }> {
  const found = new Map<string, { base: string; file: string }>();
  for (const file of files) {
    for (const match of readFileSync(file, "utf8").matchAll(/^(?:export )?class (\w+) extends ([\w.]+)/gm)) {
      found.set(match[1] ?? "", { base: match[2] ?? "", file: relative(ROOT, file) });
    }
  }
  return found;
}

/** The classes whose chain reaches a built-in error without passing through ProvisionerError. */
function unrooted(found: Map<string, { base: string; file: string }>): string[] {
  const rooted = (name: string, depth = 0): boolean | undefined => {
    if (name === "ProvisionerError") return true;
    const declared = found.get(name);
    if (!declared) return /Error$/.test(name) ? false : undefined;
    return depth > 20 ? false : rooted(declared.base, depth + 1);
  };
  return [...found].filter(([name]) => name !== "ProvisionerError" && rooted(name) === false).map(([name, { file }]) => `${name} (${file})`);
}

describe("error classes", () => {
  const files = [...sources("lib"), ...sources("dev")];

  it("are all rooted in ProvisionerError, in lib/ and dev/", () => {
    const found = classes(files);

    expect(found.size).toBeGreaterThan(30);
    expect(unrooted(found)).toEqual([]);
  });

  it("leave no bare `throw new Error` in lib/", () => {
    const bare = sources("lib").flatMap((file) =>
      readFileSync(file, "utf8")
        .split("\n")
        .flatMap((line, index) => (/\bthrow new Error\(/.test(line) ? [`${relative(ROOT, file)}:${index + 1}`] : [])),
    );

    expect(bare).toEqual([]);
  });
});
