/**
 * The direction of this repo's own imports, as lint rules (`npm run lint`):
 * - `layers/direction`: a file of one layer may not import a folder above it (ZONES below, the
 *   table of docs/architecture.md); the message says where the code belongs instead;
 * - `layers/no-cycle`: no two modules reach each other through imports, type-only imports included
 *   (a type loop still ties the modules' meaning together and breaks as soon as a value is added).
 * Both resolve relative specifiers to files, so what counts is where the imported file lives, not
 * how the path to it is spelled. Package imports are no-restricted-imports' business (eslint.config.js).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** The domain folders: below the use cases, beside one another. */
export const DOMAIN = ["lib/admission", "lib/choria", "lib/config", "lib/crypto", "lib/engine", "lib/helper", "lib/lease", "lib/observability", "lib/errors.ts", "lib/ports"];

/**
 * Each zone: the files it holds, what they may not import, and where code that needs it belongs.
 * docs/architecture.md's table lists the same folders and the same forbidden imports
 * (test/unit/layers/architecture-doc.test.ts holds the two together).
 */
export const ZONES = [
  {
    name: "domain",
    files: DOMAIN,
    forbidden: ["lib/app", "lib/aws", "lib/dynamodb", "lib/nats", "cli"],
    belongs:
      "domain code takes ports: a use case belongs in lib/app, AWS code in lib/aws, DynamoDB code in lib/dynamodb, NATS code in lib/nats; a type both sides need belongs in the domain (lib/ports/)",
  },
  {
    name: "app",
    files: ["lib/app"],
    forbidden: ["lib/aws", "lib/dynamodb", "lib/nats", "cli"],
    belongs:
      "use cases take ports (lib/app/use-case-ports.ts): the AWS adapter belongs in lib/aws, DynamoDB code in lib/dynamodb, the NATS adapter in lib/nats, and the wiring of any of them in lib/aws",
  },
  {
    name: "nats",
    files: ["lib/nats"],
    forbidden: ["lib/aws", "lib/dynamodb", "cli"],
    belongs: "NATS adapters implement the ports of lib/app and lib/ports: the composition that gives them AWS settings, clients or stores belongs in lib/aws",
  },
  {
    name: "dynamodb",
    files: ["lib/dynamodb"],
    forbidden: ["lib/aws", "lib/nats", "cli"],
    belongs:
      "DynamoDB adapters implement the ports of lib/app and the domain: the composition that gives them settings, clients or other adapters belongs in lib/aws (a type they share with it belongs in lib/dynamodb or the domain)",
  },
  {
    name: "aws",
    files: ["lib/aws"],
    forbidden: ["cli"],
    belongs: "lib/aws composes what the entry points run: the CLI's parsing and printing belong in cli/",
  },
];

const within = (file, place) => file === place || file.startsWith(`${place}/`);
const repoPath = (absolute) => relative(ROOT, absolute).split(sep).join("/");
const zoneOf = (file) => ZONES.find((zone) => zone.files.some((place) => within(file, place)));

const EXTENSIONS = ["", ".ts", ".mts", ".js", ".mjs", "/index.ts"];
function resolveImport(fromAbsolute, specifier) {
  if (!specifier.startsWith(".")) return undefined;
  const base = resolve(dirname(fromAbsolute), specifier);
  for (const extension of EXTENSIONS) {
    const candidate = base + extension;
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

const SOURCE = /\.(ts|mts)$/;
const SKIP = new Set(["node_modules", "dist", "coverage", "reports", ".serverless", ".esbuild", ".local-stack", ".git"]);
let graph;
/** Every source file's imports (relative ones, resolved), read once per lint run. */
function importGraph() {
  if (graph) return graph;
  graph = new Map();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (SKIP.has(entry.name)) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (SOURCE.test(entry.name)) graph.set(path, importsOf(path, readFileSync(path, "utf8")));
    }
  };
  walk(ROOT);
  return graph;
}

function importsOf(absolute, text) {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return [...new Set(importedFiles.map((imported) => resolveImport(absolute, imported.fileName)).filter(Boolean))];
}

const reachable = new Map();
/** Every file `from` reaches through imports, read from the files as they are on disk (memoised per lint run). */
function reach(from) {
  let found = reachable.get(from);
  if (found) return found;
  found = new Set();
  const stack = [from];
  while (stack.length > 0) {
    for (const next of importGraph().get(stack.pop()) ?? []) {
      if (!found.has(next)) {
        found.add(next);
        stack.push(next);
      }
    }
  }
  reachable.set(from, found);
  return found;
}

/** The shortest path of imports from `from` to `to`, for the message (asked only once a loop is known). */
function pathBetween(from, to) {
  const parent = new Map([[from, undefined]]);
  const queue = [from];
  for (let index = 0; index < queue.length; index++) {
    const current = queue[index];
    for (const next of importGraph().get(current) ?? []) {
      if (parent.has(next)) continue;
      parent.set(next, current);
      if (next === to) {
        const path = [to];
        for (let step = current; step !== undefined; step = parent.get(step)) path.unshift(step);
        return path;
      }
      queue.push(next);
    }
  }
  return [from, to];
}

function sources(node) {
  if ((node.type === "ImportDeclaration" || node.type === "ExportNamedDeclaration" || node.type === "ExportAllDeclaration") && node.source) return node.source;
  if (node.type === "ImportExpression" && node.source.type === "Literal") return node.source;
  return undefined;
}

const direction = {
  meta: { type: "problem", schema: [], docs: { description: "an import runs down the layers, never up (docs/architecture.md)" } },
  create(context) {
    const file = repoPath(context.filename);
    const zone = zoneOf(file);
    if (!zone) return {};
    const check = (node) => {
      const source = sources(node);
      if (!source || typeof source.value !== "string") return;
      const target = resolveImport(context.filename, source.value);
      const imported = target ? repoPath(target) : undefined;
      const place = imported && zone.forbidden.find((forbidden) => within(imported, forbidden));
      if (!place) return;
      context.report({ node: source, message: `${file} (${zone.name} layer) may not import ${place} (${imported}): ${zone.belongs}.` });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

const noCycle = {
  meta: { type: "problem", schema: [], docs: { description: "no import cycles, type-only imports included" } },
  create(context) {
    // The linted text's own imports are read from the AST below; the rest of the graph from disk, so
    // a loop through the file is found as the file now stands (reaching it is all the graph must tell).
    const file = resolve(context.filename);
    const check = (node) => {
      const source = sources(node);
      if (!source || typeof source.value !== "string") return;
      const target = resolveImport(file, source.value);
      if (!target || !(target === file || reach(target).has(file))) return;
      const loop = [file, ...pathBetween(target, file)].map(repoPath).join(" -> ");
      context.report({
        node: source,
        message: `import cycle (type imports count): ${loop}. Move what both need into a module of its own that neither side's other imports reach.`,
      });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default { meta: { name: "layers" }, rules: { direction, "no-cycle": noCycle } };
