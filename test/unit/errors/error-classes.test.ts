/**
 * Every error class of lib/ and dev/ is rooted in ProvisionerError (so `messageOf`, the handlers'
 * failure mapping and the CLI treat them as ours), and no production path in lib/ throws a bare
 * Error that names no kind of failure. Read from the source, as the layer test reads imports.
 */
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { describe, expect, it } from "vitest";
import { declaredClasses, extendsClass, ROOT, sources, type DeclaredClass } from "./declared-classes";

/** The classes whose chain reaches a built-in error without passing through ProvisionerError. */
function unrooted(found: Map<string, DeclaredClass>): string[] {
  return [...found.values()]
    .filter(({ name }) => name !== "ProvisionerError" && extendsClass(name, "ProvisionerError", found) === false)
    .map(({ name, file }) => `${name} (${file})`);
}

describe("error classes", () => {
  const files = [...sources("lib"), ...sources("dev")];

  it("are all rooted in ProvisionerError, in lib/ and dev/", () => {
    const found = declaredClasses(files);

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
