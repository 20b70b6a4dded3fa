/**
 * Checks the section references (the section sign and a number, e.g. `docs/protocol.md \u00a74.4`)
 * in code, tests, tooling and docs: each must point into one of the two specification documents
 * this repository carries, at a section that document has, and a "step N" after it at a numbered
 * step of that section.
 *
 * A reference names its document right before the sign: a path from the repository root, or one
 * relative to the citing file (`protocol.md` inside docs/), or a markdown link. A bare reference
 * takes the document of the reference it follows in a list (`\u00a71, \u00a74`, `\u00a72-\u00a74`,
 * also across a line break), otherwise the citing file's home document: the document itself inside
 * a specification document, else the first document the file named. A bare reference before any
 * named one is a problem, and so is any other word before the sign that is not a prose word like
 * "see". (The sign is written as an escape in this file so its examples are not checked.)
 *
 * Run by `test/unit/docs/spec-references.test.ts`; by hand: `npx tsx scripts/spec-references.ts`.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, posix, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The specification documents, as paths from the repository root. */
export const SPEC_DOCUMENTS = ["docs/protocol.md", "docs/behaviour.md"] as const;

/** Where references are looked for, from the repository root. */
export const SCANNED_PATHS = ["lib", "cli", "dev", "handlers", "eslint-rules", "test", "scripts", "bench", "docs", "examples", "config", ".ci", "README.md", "serverless.yml"];

const SCANNED_EXTENSIONS = /\.(ts|js|cjs|mjs|md|sh|ya?ml|json)$/;
const SKIPPED_DIRECTORIES = new Set(["node_modules", ".serverless", ".esbuild"]);

const SIGN = "\u00a7";
const REFERENCE = new RegExp(`${SIGN}(\\s*)(\\d+(?:\\.\\d+)*)?`, "g");
const STEP_ITEM = /^ {0,3}(\d+)\.\s/;
/** "step 2", "steps 5-8", "steps 1, 2 and 4" right after a reference. */
const STEPS = /^\s+steps?\s+(\d+(?:\s*(?:-|,|and|to)\s*\d+)*)/;
const HEADING = new RegExp(`^#{1,6}\\s+(?:${SIGN}\\s*)?(\\d+(?:\\.\\d+)*)\\.?(?:\\s|$)`);
/** Words that may stand before a bare reference ("see \u00a75") without naming a document. */
const PROSE_WORDS = new Set(["and", "or", "see", "in", "of", "to", "also", "under", "by", "from", "with", "per", "as"]);
/** What may separate two references of one list ("\u00a71, \u00a74", "\u00a72-\u00a74", "\u00a79.3 and \u00a79.4"). */
const LIST_GAP = /^(?:[\s,;&/*#-]|\band\b|\bor\b|\bto\b)*$/;

export interface SpecReferenceProblem {
  file: string;
  line: number;
  reference: string;
  problem: string;
}

/** A specification document's sections: number -> the numbers of the numbered steps in its text. */
export type Sections = ReadonlyMap<string, ReadonlySet<string>>;

/**
 * The sections of a specification document, from headings like `## 4.` or `### 4.4 Title`, each
 * with the numbers of the ordered-list items (`1.`, `12.`) between its heading and the next one.
 */
export function sectionsOf(markdown: string): Map<string, Set<string>> {
  const sections = new Map<string, Set<string>>();
  let steps: Set<string> | undefined;
  for (const line of markdown.split("\n")) {
    if (/^#{1,6}\s/.test(line)) {
      const number = HEADING.exec(line)?.[1];
      steps = number === undefined ? undefined : new Set();
      if (number !== undefined && steps) sections.set(number, steps);
      continue;
    }
    const step = STEP_ITEM.exec(line)?.[1];
    if (step !== undefined) steps?.add(step);
  }
  return sections;
}

/**
 * The problems in one file's references. `file` is the path from the repository root (with `/`);
 * `sections` maps each specification document to its sections (see sectionsOf).
 */
export function findReferenceProblems(file: string, text: string, sections: ReadonlyMap<string, Sections>): SpecReferenceProblem[] {
  const problems: SpecReferenceProblem[] = [];
  let home: string | undefined = sections.has(file) ? file : undefined;
  // The reference before this one; `document` undefined when it was already reported as bad.
  let previous: { document: string | undefined; end: number } | undefined;
  for (const match of text.matchAll(REFERENCE)) {
    const section = match[2];
    const lineStart = text.lastIndexOf("\n", match.index - 1) + 1;
    const end = match.index + match[0].length;
    const report = (problem: string) => {
      const line = text.slice(0, match.index).split("\n").length;
      const reference = text.slice(Math.max(lineStart, match.index - 40), end).trimStart();
      problems.push({ file, line, reference, problem });
      previous = { document: undefined, end };
    };
    if (section === undefined) {
      report(`${SIGN} without a section number`);
      continue;
    }
    let document: string | undefined;
    const named = namedDocument(text.slice(lineStart, match.index));
    if (named !== undefined) {
      document = resolveDocument(file, named, sections);
      if (document === undefined) {
        report(`names "${named}"; references must name ${SPEC_DOCUMENTS.join(" or ")}`);
        continue;
      }
      home ??= document;
    } else if (previous && LIST_GAP.test(text.slice(previous.end, match.index))) {
      // A later member of a list whose first member was bad: reported once, with the first.
      if (previous.document === undefined) {
        previous.end = end;
        continue;
      }
      document = previous.document;
    } else {
      document = home;
    }
    if (document === undefined) {
      report(`names no document, and none is named before it in this file; write ${SPEC_DOCUMENTS[0]} ${SIGN}${section}`);
      continue;
    }
    const steps = sections.get(document)?.get(section);
    if (!steps) {
      report(`${document} has no section ${section}`);
      continue;
    }
    const cited = STEPS.exec(text.slice(end, end + 80))?.[1];
    const missing = cited?.match(/\d+/g)?.filter((step) => !steps.has(step)) ?? [];
    if (missing.length > 0) report(`${document} ${SIGN}${section} has no step ${missing.join(", ")}`);
    previous = { document, end };
  }
  return problems;
}

/** The document a reference names right before its sign, or undefined for a bare reference. */
function namedDocument(before: string): string | undefined {
  const token = /(\S*)\s*$/.exec(before)?.[1] ?? "";
  const link = /\]\(([^)\s]+)\)$/.exec(token);
  if (link?.[1]) return link[1];
  const word = token.replace(/^[([{"'`*_]+/, "").replace(/[`*_:]+$/, "");
  if (word.includes(SIGN) || !/[A-Za-z]/.test(word) || /[,;.)]$/.test(word) || PROSE_WORDS.has(word.toLowerCase())) return undefined;
  return word;
}

/** A named document as a repository path: from the repository root, or relative to the citing file. */
function resolveDocument(file: string, named: string, sections: ReadonlyMap<string, Sections>): string | undefined {
  const candidates = [posix.normalize(named), posix.normalize(posix.join(posix.dirname(file), named))];
  return candidates.find((candidate) => sections.has(candidate));
}

function scannedFiles(root: string, path: string): string[] {
  const full = join(root, path);
  let stat;
  try {
    stat = statSync(full);
  } catch {
    return [];
  }
  if (stat.isFile()) return SCANNED_EXTENSIONS.test(path) ? [path] : [];
  return readdirSync(full, { withFileTypes: true })
    .filter((entry) => !(entry.isDirectory() && SKIPPED_DIRECTORIES.has(entry.name)))
    .flatMap((entry) => scannedFiles(root, posix.join(path, entry.name)));
}

/** Every problem in the repository at `root`. */
export function checkRepository(root: string): SpecReferenceProblem[] {
  const sections = new Map<string, Sections>();
  const missing: SpecReferenceProblem[] = [];
  for (const document of SPEC_DOCUMENTS) {
    try {
      sections.set(document, sectionsOf(readFileSync(join(root, document), "utf8")));
    } catch (error) {
      missing.push({ file: document, line: 0, reference: "", problem: `cannot read the specification document: ${(error as Error).message}` });
    }
  }
  return [
    ...missing,
    ...SCANNED_PATHS.flatMap((path) => scannedFiles(root, path)).flatMap((file) => findReferenceProblems(file, readFileSync(join(root, file), "utf8"), sections)),
  ];
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const problems = checkRepository(root);
  for (const { file, line, reference, problem } of problems) console.log(`${relative(process.cwd(), join(root, file))}:${line}: ${problem} (${reference})`);
  console.log(problems.length === 0 ? "section references: all point into the specification documents" : `${problems.length} bad section reference(s)`);
  process.exitCode = problems.length === 0 ? 0 : 1;
}
