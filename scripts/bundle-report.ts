/**
 * Bundles every handler the way serverless.yml does (esbuild, CommonJS .cjs, minified, no source
 * map, everything bundled including the AWS SDK) and reports per function: bundle size, the size of
 * the deployment zip `sls package` builds (run here, offline), which engine / crypto / helper inputs
 * the bundle carries (from esbuild's metafile) and cold import time (a fresh `node` process
 * requiring the bundle, median of runs).
 *
 *   npx tsx scripts/bundle-report.ts [--runs 10] [--before <git ref>]
 *
 * `--before <ref>` also builds that ref in a temporary `git worktree` (node_modules symlinked from
 * this checkout, so both trees bundle the same dependency versions; when the ref's package-lock.json
 * differs, its own `npm ci` instead, and the report says so) and reports both trees in one
 * run on this machine; the cold imports of the two trees are interleaved (before, after, before,
 * ...) so the machine's load affects both alike. The per-function bundle targets are evaluated on
 * this tree: provision bundle <= 600 KB, status/release carry no engine/crypto/helper input,
 * every function's cold import <= 150 ms (median). Each cold import also records the CPU time the
 * process spent in it: on a shared machine the wall time also counts the time other processes had
 * the CPU, the CPU time much less so, and the two side by side tell a slower bundle from a busier machine.
 *
 * Writes reports/bundles.json and reports/bundles.md.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, stat, symlink, unlink, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs, promisify } from "node:util";
import { build, type Metafile } from "esbuild";
import { functionBundleOptions, functionHandlers } from "./function-bundle-options";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "..");

/** Domain code only `provision` needs: `status` and `release` must carry none of it. */
const PROVISIONING_CODE = ["lib/engine", "lib/crypto", "lib/helper"] as const;
/**
 * Files of those areas that hold a fact the configuration or the registry (so every function)
 * reads: counted apart, as "shared facts" (test/unit/aws/function-bundles.test.ts holds the same list).
 */
const SHARED_FACTS = new Set(["lib/engine/plan.ts", "lib/engine/waiting.ts", "lib/engine/go-duration.ts", "lib/crypto/csr.ts"]);
type ProvisioningArea = (typeof PROVISIONING_CODE)[number];

const SLS_PACKAGE_TIMEOUT_MS = 10 * 60_000;

/** The per-function bundle targets (docs/architecture.md: each function composes only what it uses). */
const TARGETS = { provisionBundleBytes: 600_000, coldImportMs: 150 } as const;

interface BundleFigures {
  function: string;
  handler: string;
  bundleBytes: number;
  /** The function's zip as `sls package` builds it (bundle + config/files). */
  zipBytes: number;
  coldImportMs: { median: number; min: number; max: number; runs: number };
  /** CPU time (user + system) of the process during the same requires: what the wall time is when nothing else runs. */
  coldImportCpuMs: { median: number; min: number; max: number };
  /** The five largest inputs by bytes in the bundle. */
  largestInputs: Array<{ path: string; bytes: number }>;
  /** The ten largest packages (node_modules package, or lib/<area>) by bytes in the bundle: where a size target goes. */
  largestPackages: Array<{ name: string; bytes: number }>;
  /** Per area of provisioning code: how many of its files the bundle carries and their bytes in the output (shared facts apart). */
  provisioningCode: Record<ProvisioningArea, { files: number; bytes: number }>;
  /** The shared-fact files of those areas the bundle carries. */
  sharedFacts: Array<{ path: string; bytes: number }>;
}

interface TreeReport {
  /** "after" is this checkout; "before" the `--before` ref. */
  label: "before" | "after";
  ref: string;
  commit: string;
  bundles: BundleFigures[];
}

interface Bundled {
  name: string;
  handler: string;
  outfile: string;
  bundleBytes: number;
  metafile: Metafile;
  times: ImportTime[];
}

interface ImportTime {
  wallMs: number;
  cpuMs: number;
}

/** A usage mistake: one line, exit 2, as in every command of the project. */
function usageError(message: string): never {
  process.stderr.write(`bundle-report: ${message}\n`);
  process.exit(2);
}

function parseOptions() {
  try {
    return parseArgs({ options: { runs: { type: "string" }, before: { type: "string" } } }).values;
  } catch (error) {
    usageError((error as Error).message);
  }
}

const options = parseOptions();
/** Cold import times scale with the machine's load: the report says how busy it was at the start and at the end. */
const loadAverageAtStart = loadavg()[0]!.toFixed(1);

function argument(name: "runs", fallback: number): number {
  const text = options[name];
  const value = text === undefined ? fallback : Number(text);
  if (!Number.isInteger(value) || value < 1) usageError(`--${name} must be a positive whole number, got "${text}"`);
  return value;
}

function textArgument(name: "before"): string | undefined {
  const value = options[name];
  if (value === undefined) return undefined;
  if (!value) usageError(`--${name} needs a value`);
  return value;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** Wall and CPU time from the start of the require to its return, in a fresh process (no module cache). */
async function coldImport(bundle: string): Promise<ImportTime> {
  const script =
    `const c0 = process.cpuUsage(); const t0 = process.hrtime.bigint(); require(${JSON.stringify(bundle)});` +
    "const wallMs = Number(process.hrtime.bigint() - t0) / 1e6; const cpu = process.cpuUsage(c0);" +
    "process.stdout.write(JSON.stringify({ wallMs, cpuMs: (cpu.user + cpu.system) / 1e3 }));";
  const { stdout } = await run(process.execPath, ["-e", script], {
    env: { PATH: process.env.PATH, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", AWS_REGION: "us-east-1" },
  });
  return JSON.parse(stdout) as ImportTime;
}

function spread(values: number[]) {
  return { median: round(median(values)), min: round(Math.min(...values)), max: round(Math.max(...values)) };
}

/** A metafile input path as it reads in either tree: node_modules paths (symlinked in the before tree) start at node_modules/. */
function inputPath(path: string): string {
  const modules = path.lastIndexOf("node_modules/");
  return modules >= 0 ? path.slice(modules) : path;
}

async function bundleOne(root: string, name: string, handler: string, outDir: string): Promise<Bundled> {
  const outfile = join(outDir, `${name}.cjs`);
  const result = await build({
    absWorkingDir: root,
    entryPoints: [join(root, handler)],
    outfile,
    ...(await functionBundleOptions(root)),
    metafile: true,
    logLevel: "error",
  });
  return { name, handler, outfile, bundleBytes: (await stat(outfile)).size, metafile: result.metafile, times: [] };
}

function figures(bundled: Bundled, packageDir: string): Promise<BundleFigures> {
  const output = Object.values(bundled.metafile.outputs).find((o) => o.entryPoint);
  const inputs = Object.entries(output?.inputs ?? {}).map(([path, input]) => ({ path: inputPath(path), bytes: input.bytesInOutput }));
  const provisioningCode = Object.fromEntries(
    PROVISIONING_CODE.map((area) => {
      const carried = inputs.filter((input) => input.path.startsWith(`${area}/`) && input.bytes > 0 && !SHARED_FACTS.has(input.path));
      return [area, { files: carried.length, bytes: carried.reduce((sum, input) => sum + input.bytes, 0) }];
    }),
  ) as BundleFigures["provisioningCode"];
  return stat(join(packageDir, `${bundled.name}.zip`)).then((zip) => ({
    function: bundled.name,
    handler: bundled.handler,
    bundleBytes: bundled.bundleBytes,
    zipBytes: zip.size,
    coldImportMs: { ...spread(bundled.times.map((t) => t.wallMs)), runs: bundled.times.length },
    coldImportCpuMs: spread(bundled.times.map((t) => t.cpuMs)),
    largestInputs: [...inputs].sort((a, b) => b.bytes - a.bytes).slice(0, 5),
    largestPackages: packagesOf(inputs).slice(0, 10),
    provisioningCode,
    sharedFacts: inputs.filter((input) => SHARED_FACTS.has(input.path) && input.bytes > 0),
  }));
}

/** Bytes per node_modules package (scoped names whole) or per lib/ area, largest first. */
function packagesOf(inputs: Array<{ path: string; bytes: number }>): Array<{ name: string; bytes: number }> {
  const totals = new Map<string, number>();
  for (const input of inputs) {
    const name = /^node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input.path)?.[1] ?? input.path.split("/").slice(0, 2).join("/");
    totals.set(name, (totals.get(name) ?? 0) + input.bytes);
  }
  return [...totals].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

async function slsPackage(root: string, packageDir: string): Promise<void> {
  await run(join(ROOT, "node_modules/.bin/sls"), ["package", "--package", packageDir, "--stage", "report"], {
    cwd: root,
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", SLS_TELEMETRY_DISABLED: "1" },
    maxBuffer: 16 * 1024 * 1024,
    // serverless-esbuild can wait forever on a failed build; a package takes well under this.
    timeout: SLS_PACKAGE_TIMEOUT_MS,
  });
}

const round = (value: number) => Math.round(value * 10) / 10;
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
const carried = (f: BundleFigures) =>
  PROVISIONING_CODE.map((area) => `${area.slice(4)} ${f.provisioningCode[area].files} (${kib(f.provisioningCode[area].bytes)})`).join(", ");
const coldText = (f: BundleFigures) =>
  `${f.coldImportMs.median} ms (${f.coldImportMs.min}-${f.coldImportMs.max}, n=${f.coldImportMs.runs}; CPU ${f.coldImportCpuMs.median} ms)`;

interface Check {
  name: string;
  met: boolean;
  detail: string;
}

function checks(after: TreeReport, before: TreeReport | undefined): Check[] {
  const of = (tree: TreeReport, fn: string) => tree.bundles.find((b) => b.function === fn) as BundleFigures;
  const provision = of(after, "provision");
  const noProvisioningCode = ["status", "release"].map((fn) => of(after, fn));
  const slowest = after.bundles.reduce((a, b) => (b.coldImportMs.median > a.coldImportMs.median ? b : a));
  const slowestBefore = before?.bundles.find((b) => b.function === slowest.function);
  return [
    {
      name: `provision bundle <= ${TARGETS.provisionBundleBytes / 1000} KB`,
      met: provision.bundleBytes <= TARGETS.provisionBundleBytes,
      detail: `${provision.bundleBytes} bytes (${kib(provision.bundleBytes)})`,
    },
    {
      name: "status/release carry no engine, crypto or helper code",
      met: noProvisioningCode.every((f) => PROVISIONING_CODE.every((area) => f.provisioningCode[area].files === 0)),
      detail:
        noProvisioningCode.map((f) => `${f.function}: ${carried(f)}`).join("; ") +
        `; shared facts carried: ${noProvisioningCode[0]!.sharedFacts.map((s) => `${s.path} ${s.bytes} B`).join(", ")}`,
    },
    {
      name: `every function's cold import <= ${TARGETS.coldImportMs} ms (median)`,
      met: after.bundles.every((f) => f.coldImportMs.median <= TARGETS.coldImportMs),
      detail: `slowest ${slowest.function} ${coldText(slowest)}${slowestBefore ? `; before ${coldText(slowestBefore)}` : ""}`,
    },
  ];
}

function markdown(after: TreeReport, before: TreeReport | undefined, meta: Record<string, string>): string {
  const trees = before ? [before, after] : [after];
  const command = before ? `npx tsx scripts/bundle-report.ts --runs ${meta.runs} --before ${before.ref}` : `npx tsx scripts/bundle-report.ts --runs ${meta.runs}`;
  const lines = [
    "# Bundle sizes and cold import times",
    "",
    `Generated by \`${command}\` on ${meta.date} (Node ${meta.node}, ${meta.platform}, load average ${meta.loadAverageAtStart} at the start, ${meta.loadAverage} at the end).`,
    before
      ? `Before: \`${before.ref}\` (${before.commit.slice(0, 12)}), built in a temporary git worktree with ${meta.beforeModules}; after: this checkout (${after.commit.slice(0, 12)}). ` +
        "Both were measured in the same run, their cold imports interleaved."
      : `This checkout: ${after.commit.slice(0, 12)}.`,
    "Bundles are built with the options of each tree's serverless.yml `custom.esbuild` (CommonJS `.cjs`, minified, `keepNames`, ES module builds of dependencies first where the tree says so),",
    "no source map, every dependency bundled (AWS SDK v3 included). \"Deploy zip\" is the function's zip as",
    "`sls package` builds it (run by the report, default params). Cold import is the time to `require` the",
    "bundle in a fresh `node` process (median of the runs; CPU: that process's CPU time in the require, which other load on the machine",
    "inflates much less than the wall time); it excludes Lambda's own runtime start.",
    "\"Engine/crypto/helper\" counts the files of lib/engine, lib/crypto and lib/helper in the bundle (metafile), apart from the",
    `shared facts every function reads through the configuration or the registry (${[...SHARED_FACTS].join(", ")}).`,
    "",
    `| function |${trees.map((t) => ` bundle (${t.label}) | zip (${t.label}) | cold import (${t.label}) |`).join("")} engine/crypto/helper files (${after.label}) |`,
    `|---|${trees.map(() => "---:|---:|---:|").join("")}---|`,
    ...after.bundles.map((f) => {
      const cells = trees.map((t) => {
        const g = t.bundles.find((b) => b.function === f.function);
        // A function the other tree does not have (added since) has nothing to compare.
        return g ? ` ${kib(g.bundleBytes)} | ${kib(g.zipBytes)} | ${coldText(g)} |` : " - | - | - |";
      });
      return `| ${f.function} |${cells.join("")} ${carried(f)} |`;
    }),
    "",
    "Acceptance (per-function bundles):",
    "",
    ...checks(after, before).map((c) => `- ${c.met ? "met" : "NOT met"}: ${c.name}: ${c.detail}`),
    "",
    "Largest packages of the after bundles of provision and status (bytes in output), where the size and import time go:",
    "",
    ...after.bundles
      .filter((f) => f.function === "provision" || f.function === "status")
      .map((f) => `- ${f.function}: ${f.largestPackages.map((p) => `${p.name} ${kib(p.bytes)}`).join(", ")}`),
    "",
    ...trees.flatMap((t) => [
      `Largest inputs per bundle, ${t.label} (bytes in output):`,
      "",
      ...t.bundles.map((f) => `- ${f.function}: ${f.largestInputs.map((i) => `${i.path.replace(/^node_modules\//, "")} ${kib(i.bytes)}`).join(", ")}`),
      "",
    ]),
  ];
  return lines.join("\n");
}

async function commitOf(root: string, ref = "HEAD"): Promise<string> {
  return (await run("git", ["rev-parse", `${ref}^{commit}`], { cwd: root })).stdout.trim();
}

async function main(): Promise<void> {
  const runs = argument("runs", 10);
  const beforeRef = textArgument("before");
  const outDir = await mkdtemp(join(tmpdir(), "bundle-report-"));
  const beforeRoot = join(outDir, "before-tree");
  let worktreeAdded = false;
  let beforeModules = "";
  try {
    const trees: Array<{ label: "before" | "after"; ref: string; root: string; commit: string }> = [];
    if (beforeRef) {
      const commit = await commitOf(ROOT, beforeRef);
      await run("git", ["worktree", "add", "--detach", beforeRoot, commit], { cwd: ROOT });
      worktreeAdded = true;
      const sameLock = await run("git", ["diff", "--quiet", commit, "--", "package-lock.json"], { cwd: ROOT }).then(
        () => true,
        () => false,
      );
      if (sameLock) await symlink(join(ROOT, "node_modules"), join(beforeRoot, "node_modules"), "dir");
      else await run("npm", ["ci", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: beforeRoot, maxBuffer: 16 * 1024 * 1024 });
      beforeModules = sameLock ? "this checkout's node_modules (same package-lock.json)" : "its own `npm ci` (its package-lock.json differs)";
      trees.push({ label: "before", ref: beforeRef, root: beforeRoot, commit });
    }
    trees.push({ label: "after", ref: "HEAD", root: ROOT, commit: await commitOf(ROOT) });

    const built = new Map<string, { bundles: Bundled[]; packageDir: string }>();
    for (const tree of trees) {
      const treeOut = join(outDir, tree.label);
      const packageDir = join(treeOut, "package");
      await mkdir(treeOut, { recursive: true });
      // esbuild first: a tree that does not build (e.g. a dependency this checkout no longer has) fails here with esbuild's error.
      const bundles: Bundled[] = [];
      for (const [name, handler] of Object.entries(await functionHandlers(tree.root))) bundles.push(await bundleOne(tree.root, name, handler, treeOut));
      await slsPackage(tree.root, packageDir);
      built.set(tree.label, { bundles, packageDir });
    }

    // Interleaved: every round measures each function once per tree, before and after back to back.
    for (let round = 0; round < runs; round += 1) {
      for (const { name } of built.get("after")?.bundles ?? []) {
        for (const tree of trees) {
          // A function the before tree does not have is measured in the after tree only.
          const bundled = built.get(tree.label)?.bundles.find((b) => b.name === name);
          if (bundled) bundled.times.push(await coldImport(bundled.outfile));
        }
      }
    }

    const reports: TreeReport[] = [];
    for (const tree of trees) {
      const { bundles, packageDir } = built.get(tree.label) as { bundles: Bundled[]; packageDir: string };
      reports.push({ label: tree.label, ref: tree.ref, commit: tree.commit, bundles: await Promise.all(bundles.map((b) => figures(b, packageDir))) });
    }
    const after = reports.find((r) => r.label === "after") as TreeReport;
    const before = reports.find((r) => r.label === "before");
    for (const f of after.bundles) {
      const g = before?.bundles.find((b) => b.function === f.function);
      console.log(
        `${f.function.padEnd(16)} ${g ? `${kib(g.bundleBytes).padStart(11)} -> ` : ""}${kib(f.bundleBytes).padStart(11)}  cold import ${g ? `${g.coldImportMs.median} -> ` : ""}${f.coldImportMs.median} ms (CPU ${g ? `${g.coldImportCpuMs.median} -> ` : ""}${f.coldImportCpuMs.median} ms)  ${carried(f)}`,
      );
    }
    const meta = {
      date: new Date().toISOString(),
      node: process.version,
      platform: `${process.platform}/${process.arch}`,
      runs: String(runs),
      ...(beforeRef ? { beforeModules } : {}),
      // Cold import times scale with the machine's load; the report says how busy it was.
      loadAverageAtStart,
      loadAverage: loadavg()[0]!.toFixed(1),
    };
    const results = checks(after, before);
    for (const check of results) console.log(`${check.met ? "met    " : "NOT met"} ${check.name}: ${check.detail}`);
    await mkdir(join(ROOT, "reports"), { recursive: true });
    await writeFile(
      join(ROOT, "reports/bundles.json"),
      `${JSON.stringify({ ...meta, checks: results, ...(before ? { before } : {}), after }, null, 2)}\n`,
    );
    await writeFile(join(ROOT, "reports/bundles.md"), markdown(after, before, meta));
    console.log("wrote reports/bundles.json and reports/bundles.md");
  } finally {
    if (worktreeAdded) {
      // The link first, so removing the worktree cannot reach into this checkout's node_modules.
      if (beforeModules.startsWith("this checkout")) await unlink(join(beforeRoot, "node_modules")).catch(() => undefined);
      await run("git", ["worktree", "remove", "--force", beforeRoot], { cwd: ROOT }).catch(() => undefined);
    }
    await rm(outDir, { recursive: true, force: true });
  }
}

await main();
