/**
 * npm runs a dependency's install scripts only when package.json's `allowScripts` names it, and
 * ends every install with a warning listing each one it does not. Our lockfile records no download
 * URLs, so npm has no version it trusts for a package and matches only entries by name: a pinned
 * `"esbuild@0.28.2": true` is ignored and the warning stays. So every locked package with an
 * install script is named in `allowScripts`, by name alone.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");

interface LockedPackage {
  resolved?: string;
  hasInstallScript?: boolean;
}

const lock = JSON.parse(readFileSync(resolve(ROOT, "package-lock.json"), "utf8")) as { packages: Record<string, LockedPackage> };
const manifest = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")) as { allowScripts: Record<string, boolean> };

/** `node_modules/a/node_modules/@scope/b` -> `@scope/b`. */
const packageName = (path: string) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);

describe("allowScripts", () => {
  it("the lockfile records no download URL, so npm matches allowScripts entries by name alone", () => {
    expect(Object.values(lock.packages).filter((entry) => entry.resolved !== undefined)).toEqual([]);
  });

  it("names, without a version, every locked package that has an install script", () => {
    const withInstallScripts = Object.entries(lock.packages)
      .filter(([, entry]) => entry.hasInstallScript === true)
      .map(([path]) => packageName(path));

    expect(withInstallScripts.length).toBeGreaterThan(0);
    expect(withInstallScripts.filter((name) => manifest.allowScripts[name] === undefined)).toEqual([]);
  });
});
