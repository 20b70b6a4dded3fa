/**
 * The local run's live status line, fitted to the terminal's width. Every part has renderings from
 * the fullest to the shortest, each with how long it holds out: detail (the invocation count, zero
 * counts, a live leader, padding) gives way first, the diagnosis (a missing or crashed leader, what
 * a stalled run waits for and the error behind it) last, and a line is never wider than the width,
 * so a terminal never wraps it and each rewrite replaces all of it.
 */
import type { WaitGroup } from "./registry-view";
import type { ProgressSnapshot } from "./run";

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

interface LineForm {
  text: string;
  /** When the line is too wide, the form with the lowest `keep` gives way to its part's next one. */
  keep: number;
  /** When its turn comes, the form is first cut at its end, down to `to` characters (an error's tail goes), and gives way at `cut.keep`. */
  cut?: { to: number; keep: number };
}

interface LinePart {
  forms: readonly LineForm[];
  /** Past its last form it may be left out. */
  optional?: boolean;
  /** Parts of one group give way and come back together (the zero counts: all shown or none). */
  group?: string;
}

/** One rendering of a part, in the order they give way: each form, then its cut where it has one. */
interface PartState {
  text: string;
  keep: number;
  cutTo?: number;
}

const SEPARATOR = " | ";

function statesOf(part: LinePart): PartState[] {
  return part.forms.flatMap((form) => [{ text: form.text, keep: form.keep }, ...(form.cut ? [{ text: form.text, keep: form.cut.keep, cutTo: form.cut.to }] : [])]);
}

/** The line from the parts' states (undefined: left out); a state that may be cut gives back the overflow, down to its `cutTo`. */
function render(states: ReadonlyArray<PartState | undefined>, width: number): { line: string; cutChars: number } {
  const shown = states.filter((state): state is PartState => state !== undefined);
  const pieces = shown.map((state) => state.text);
  let overflow = pieces.join(SEPARATOR).length - width;
  let cutChars = 0;
  shown.forEach((state, index) => {
    if (overflow <= 0 || state.cutTo === undefined) return;
    // One character of the cut goes to the "…".
    const kept = Math.max(state.cutTo, state.text.length - overflow - 1);
    if (kept >= state.text.length - 1) return;
    pieces[index] = `${state.text.slice(0, kept)}…`;
    const saved = state.text.length - kept - 1;
    overflow -= saved;
    cutChars += saved;
  });
  return { line: pieces.join(SEPARATOR), cutChars };
}

/**
 * The parts fitted to `width`: the state with the lowest `keep` gives way, one step at a time, until
 * the line fits; then what gave way comes back, latest first, where it fits without cutting more of
 * the diagnosis. Cut at the end with "…" only when nothing can give way any more.
 */
function fitParts(parts: readonly LinePart[], width: number): string {
  const states = parts.map(statesOf);
  const chosen = parts.map(() => 0);
  const attempt = () => render(states.map((list, index) => list[chosen[index] as number]), width);
  // An optional part may go past its last state: left out.
  const canGiveWay = (index: number) => (chosen[index] as number) < (states[index] as PartState[]).length - (parts[index]?.optional === true ? 0 : 1);
  const keepOf = (index: number) => states[index]?.[chosen[index] as number]?.keep ?? Infinity;
  // The parts that move with `index`: its group, or itself.
  const together = (index: number) => {
    const group = parts[index]?.group;
    return group === undefined ? [index] : parts.flatMap((part, other) => (part.group === group && canGiveWay(other) ? [other] : []));
  };
  const move = (indexes: readonly number[], by: number) => indexes.forEach((index) => (chosen[index] = (chosen[index] as number) + by));
  const steps: number[][] = [];
  while (attempt().line.length > width) {
    let weakest: number | undefined;
    // Of equal keeps the rightmost gives way first.
    for (let index = 0; index < parts.length; index++) {
      if (canGiveWay(index) && (weakest === undefined || keepOf(index) <= keepOf(weakest))) weakest = index;
    }
    if (weakest === undefined) return `${attempt().line.slice(0, Math.max(0, width - 1))}…`;
    const step = together(weakest);
    move(step, 1);
    steps.push(step);
  }
  let { cutChars } = attempt();
  for (const step of steps.reverse()) {
    move(step, -1);
    const tried = attempt();
    if (tried.line.length > width || tried.cutChars > cutChars) move(step, 1);
    else cutChars = tried.cutChars;
  }
  return attempt().line;
}

/**
 * What the unfinished hosts wait for, fullest first: every group in full with its last error, then
 * every group in a few words with its error; that cut at the end, first keeping 40 of the first
 * group's error characters, then (once the detail is gone) 15; then the first group and how many more.
 */
function waitingForForms(groups: readonly WaitGroup[]): LineForm[] {
  const label = "waiting for: ";
  const [first, ...rest] = groups;
  if (!first) return [];
  const full = (group: WaitGroup) => (group.lastError === undefined ? group.text : `${group.text} (last error: ${group.lastError})`);
  const brief = (group: WaitGroup) => (group.lastError === undefined ? group.short : `${group.short}: ${group.lastError}`);
  // The first group's few words, and this much of its error, survive a cut.
  const head = (errorKept: number) => label.length + first.short.length + (first.lastError === undefined ? 0 : 2 + errorKept);
  const others = rest.reduce((sum, group) => sum + group.hosts, 0);
  const briefAll = label + groups.map(brief).join("; ");
  return [
    { text: label + groups.map(full).join("; "), keep: 3.2 },
    { text: briefAll, keep: 3.3, cut: { to: head(40), keep: 3.45 } },
    { text: briefAll, keep: 4.6, cut: { to: head(15), keep: 6 } },
    { text: label + brief(first) + (others > 0 ? `; ${others} more` : ""), keep: 7.5, cut: { to: head(15), keep: 8 } },
  ];
}

/**
 * The status line's parts, by how much each says about why the run is where it is. Counts that are
 * zero, the invocation count and a live leader are detail; a missing or crashed leader and what a
 * stalled run waits for are the diagnosis.
 */
function statusParts(s: ProgressSnapshot): LinePart[] {
  const width = String(s.total).length;
  const stalled = s.waitingFor !== undefined && s.waitingFor.length > 0;
  // Past their padding, the counts give way only to the diagnosis: waiting and in progress first,
  // retrying and failed last, provisioned never (alone it still adds up: N of the total). While the
  // run is stalled the waiting-for groups say the same of the unfinished hosts, in more words.
  const count = (label: string, value: number, keep: number): LinePart =>
    value === 0
      ? { forms: [{ text: `${label} ${String(value).padStart(width)}`, keep: 1 }], optional: true, group: "zero counts" }
      : {
          forms: [
            { text: `${label} ${String(value).padStart(width)}`, keep: 3 },
            { text: `${label} ${value}`, keep: stalled ? 4 : keep },
          ],
          optional: true,
        };
  const leader: LinePart =
    s.leader === undefined
      ? { forms: [{ text: "no leader", keep: 7 }] }
      : { forms: [{ text: `leader ${s.leader} term ${s.term}`, keep: 2 }, { text: `leader ${s.leader}`, keep: 3.5 }], optional: true };
  return [
    count("waiting", s.waiting, 8),
    count("in progress", s.inProgress, 8),
    count("retrying", s.retrying, 8.5),
    count("failed", s.failed, 8.5),
    {
      forms: [
        { text: `provisioned ${String(s.provisioned).padStart(width)}/${s.total}`, keep: 3 },
        { text: `provisioned ${s.provisioned}/${s.total}`, keep: 9 },
      ],
    },
    leader,
    ...(s.crashed.length > 0 ? [{ forms: [{ text: `crashed: ${s.crashed.join(",")}`, keep: 7 }] }] : []),
    { forms: [{ text: `invocations ${s.invocations}`, keep: 0 }], optional: true },
    ...(stalled ? [{ forms: waitingForForms(s.waitingFor ?? []) }] : []),
  ];
}

/** The status line for `width` columns; unbounded, every part in full (the plain lines). */
export function formatStatusLine(snapshot: ProgressSnapshot, width = Infinity): string {
  const stamp = `[${seconds(snapshot.elapsedMs).padStart(7)}] `;
  return stamp + fitParts(statusParts(snapshot), width - stamp.length);
}
