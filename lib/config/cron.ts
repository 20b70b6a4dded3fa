/**
 * A small, strict five-field cron expression (minute hour day-of-month month day-of-week), as
 * renewal's maintenance windows and freezes take it (docs/renewal.md, "Change control"). Each field
 * is `*`, a number, a range `a-b`, a step (`a-b/n`, or `*` followed by `/n`), or a comma list of those; months and
 * weekdays may be named (`jan`, `mon`); weekday 7 is Sunday as 0 is. As in Vixie cron, when both
 * day-of-month and day-of-week are restricted a day matches either. Nothing else (no `@daily`, no
 * seconds, no `L` or `#`): what is not understood is refused, with every mistake named at once.
 */

/** A field's allowed values: `values[v]` is true when v matches. */
export interface CronSchedule {
  readonly text: string;
  readonly minute: readonly boolean[];
  readonly hour: readonly boolean[];
  readonly dayOfMonth: readonly boolean[];
  readonly month: readonly boolean[];
  readonly dayOfWeek: readonly boolean[];
  /** Whether day-of-month and day-of-week were each restricted (not `*`), for the either-matches rule. */
  readonly daysRestricted: { readonly ofMonth: boolean; readonly ofWeek: boolean };
}

interface FieldSpec {
  name: string;
  min: number;
  max: number;
  names?: readonly string[];
}

const FIELDS: readonly FieldSpec[] = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"] },
  { name: "day of week", min: 0, max: 7, names: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] },
];

/** The most days each month has (February in a leap year). */
const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** The schedule, or every mistake in it (each a sentence naming the field). */
export function parseCron(text: string): { schedule: CronSchedule } | { problems: string[] } {
  const parts = text.trim().split(/\s+/);
  if (parts.length !== FIELDS.length || parts[0] === "") {
    return { problems: [`"${text}" has ${parts[0] === "" ? 0 : parts.length} fields; a cron expression has 5: minute hour day-of-month month day-of-week (no @ shorthands, no seconds)`] };
  }
  const problems: string[] = [];
  const fields = FIELDS.map((spec, index) => parseField(parts[index] as string, spec, problems));
  if (problems.length > 0) return { problems };
  const [minute, hour, dayOfMonth, month, dayOfWeek] = fields as [boolean[], boolean[], boolean[], boolean[], boolean[]];
  dayOfWeek[0] = dayOfWeek[0] === true || dayOfWeek[7] === true;
  const daysRestricted = { ofMonth: parts[2] !== "*", ofWeek: parts[4] !== "*" };
  // cert-manager #9146: a schedule that can never fire is refused, not accepted silently.
  if (daysRestricted.ofMonth && !daysRestricted.ofWeek && !month.some((on, m) => on && dayOfMonth.some((day, d) => day && d <= (DAYS_IN_MONTH[m - 1] ?? 0)))) {
    return { problems: [`"${text}" never matches: no month it allows has a day it allows`] };
  }
  return { schedule: { text, minute, hour, dayOfMonth, month, dayOfWeek, daysRestricted } };
}

function parseField(text: string, spec: FieldSpec, problems: string[]): boolean[] {
  const values = new Array<boolean>(spec.max + 1).fill(false);
  for (const item of text.split(",")) {
    const problem = parseItem(item, spec, values);
    if (problem) problems.push(`${spec.name} "${text}": ${problem}`);
  }
  return values;
}

/** Marks what one comma-separated item allows; returns what is wrong with it, if anything. */
function parseItem(item: string, spec: FieldSpec, values: boolean[]): string | undefined {
  const match = /^([^/]+)(?:\/(\d+))?$/.exec(item);
  if (!match) return `"${item}" is not *, a value, a range a-b or a step (*/n, a-b/n)`;
  const [, range, stepText] = match as unknown as [string, string, string | undefined];
  const step = stepText === undefined ? 1 : Number(stepText);
  if (!(step >= 1)) return `the step in "${item}" must be at least 1`;
  let from = spec.min;
  let to = spec.max === 7 ? 6 : spec.max;
  if (range !== "*") {
    const bounds = range.split("-");
    if (bounds.length > 2) return `"${item}" is not a range a-b`;
    const [low, high] = bounds.map((bound) => valueOf(bound, spec));
    if (low === undefined || (bounds.length === 2 && high === undefined)) {
      return `"${item}" is not a number from ${spec.min} to ${spec.max}${spec.names ? ` or a name (${spec.names.join(", ")})` : ""}`;
    }
    from = low;
    // `a/n` runs from a to the field's end, as in Vixie cron.
    to = high ?? (stepText === undefined ? low : spec.max);
    if (from > to) return `the range "${item}" runs backwards`;
  }
  for (let value = from; value <= to; value += step) values[value] = true;
  return undefined;
}

function valueOf(text: string, spec: FieldSpec): number | undefined {
  const named = spec.names?.indexOf(text.toLowerCase()) ?? -1;
  if (named >= 0) return named + (spec.name === "month" ? 1 : 0);
  if (!/^\d+$/.test(text)) return undefined;
  const value = Number(text);
  return value >= spec.min && value <= spec.max ? value : undefined;
}

/** Whether the schedule fires at this wall-clock minute (fields as read in the schedule's timezone). */
export function cronMatches(schedule: CronSchedule, wall: { minute: number; hour: number; day: number; month: number; weekday: number }): boolean {
  if (!schedule.minute[wall.minute] || !schedule.hour[wall.hour] || !schedule.month[wall.month]) return false;
  const ofMonth = schedule.dayOfMonth[wall.day] === true;
  const ofWeek = schedule.dayOfWeek[wall.weekday] === true;
  const { daysRestricted } = schedule;
  if (daysRestricted.ofMonth && daysRestricted.ofWeek) return ofMonth || ofWeek;
  return ofMonth && ofWeek;
}
