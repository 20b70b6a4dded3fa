/**
 * The classes declared in the repo's sources, read from the text as the layer test reads imports:
 * what the error-class tests enumerate, so a new error class is covered without a list to update.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../../..");

export interface DeclaredClass {
  name: string;
  /** The class it extends, as written. */
  base: string;
  /** Relative to the repo. */
  file: string;
  exported: boolean;
  /** `class X extends Y {}`: it behaves as its base, under its own name. */
  emptyBody: boolean;
  declaresConstructor: boolean;
}

/** The TypeScript source files under `folder` (relative to the repo), as absolute paths. */
export function sources(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".ts") && !path.endsWith(".d.ts"))
    .map((path) => join(ROOT, folder, path));
}

/** Each class declared at the top level of `files`, by name. */
export function declaredClasses(files: string[]): Map<string, DeclaredClass> {
  const found = new Map<string, DeclaredClass>();
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/^(export )?class (\w+) extends ([\w.]+)/gm)) {
      const name = match[2] ?? "";
      const open = text.indexOf("{", match.index);
      const emptyBody = text[open + 1] === "}";
      // The body runs to the first line that closes a top-level block.
      const bodyEnd = text.indexOf("\n}", open);
      const body = emptyBody ? "" : text.slice(open + 1, bodyEnd === -1 ? undefined : bodyEnd);
      found.set(name, {
        name,
        base: match[3] ?? "",
        file: relative(ROOT, file),
        exported: match[1] !== undefined,
        emptyBody,
        declaresConstructor: /^\s*constructor\(/m.test(body),
      });
    }
  }
  return found;
}

/**
 * Whether `name`'s chain of bases reaches `root`: true, false when it reaches a built-in error
 * (a name ending in Error that is not declared here) first, undefined for a class that is no error.
 */
export function extendsClass(name: string, root: string, found: Map<string, DeclaredClass>, depth = 0): boolean | undefined {
  if (name === root) return true;
  const declared = found.get(name);
  if (!declared) return /Error$/.test(name) ? false : undefined;
  return depth > 20 ? false : extendsClass(declared.base, root, found, depth + 1);
}
