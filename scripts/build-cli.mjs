// `npm run build:cli`: bundles the operator CLI (cli/main.ts and what it imports) into one
// ES module, dist/choria-provisioner.mjs, so an install runs it with plain node: no tsx, no
// TypeScript, one file to load (it starts in a fraction of a second). `npm pack` runs it (prepack),
// so the tarball operators install carries the bundle; `npm run build` (and so `npm test`) runs it
// in a checkout. It is not an install script: esbuild is a dev dependency, and an install without
// dev dependencies (`npm ci --omit=dev`, or the packed tarball's own install) must not need it.
import { build } from "esbuild";
import { fileURLToPath, URL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
await build({
  absWorkingDir: root,
  entryPoints: ["cli/main.ts"],
  outfile: "dist/choria-provisioner.mjs",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node22",
  mainFields: ["module", "main"],
  minify: true,
  legalComments: "external",
  // Bundled CommonJS dependencies call require() for Node's built-ins; an ES module has none of its own.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  logLevel: "warning",
});
