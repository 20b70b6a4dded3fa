/**
 * Renewal under change control (docs/renewal.md, "Change control"), as the configuration sets it:
 * maintenance windows and freezes, checked at load so that every credential lifetime the site
 * issues has a moment renewal may send in before it expires; slow start; and the abort rule.
 * Every bad window or freeze entry is reported in one run, each naming its key and entry.
 */
import { ConfigError, ConfigProblemsError } from "../errors";
import { parseCron } from "./cron";
import { formatDuration, parseDuration } from "./duration";
import { isTimeZone, RenewCalendar, type CalendarEntry } from "./renew-calendar";
import type { RawConfig } from "./schema";
import type { RenewSection } from "./types";

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** A window or freeze lasts at most this long (a longer freeze is a renewal switched off: `renew.enabled: false`). */
const MAX_PERIOD_MS = 31 * DAY_MS;
/** The calendar is checked over a year (every weekday, month and daylight-saving change) plus one renewal window. */
const CHECKED_SPAN_MS = 366 * DAY_MS;
/** A renewal window needs at least one whole `renew` run (one a minute) inside an allowed stretch. */
const RUN_MS = MINUTE_MS;

type RawRenew = RawConfig["renew"];
const ENTRY_KEYS: readonly string[] = ["cron", "timezone", "duration"];
type Control = Pick<RenewSection, "windows" | "freezes" | "shortestLifetimeMs" | "slowStart" | "abort">;

/**
 * The change-control part of the `renew` section. `lifetimeMs` is the credentials' lifetime the
 * configuration itself sets (server_jwt_validity with features.ed25519), when it does.
 */
export function renewControlOf(raw: RawRenew, settings: { before: RenewSection["before"]; timeoutMs: number; lifetimeMs: number | undefined; now: number }): Control {
  const problems: ConfigError[] = [];
  const windows = entriesOf("renew.windows", raw.windows, problems);
  const freezes = entriesOf("renew.freezes", raw.freezes, problems);
  const shortestLifetimeMs = raw.shortest_lifetime === undefined ? undefined : positive("renew.shortest_lifetime", raw.shortest_lifetime, problems);
  if (raw.start_rate !== undefined && raw.start_rate > raw.rate) {
    problems.push(new ConfigError("renew.start_rate", `${raw.start_rate} requests a minute is above renew.rate (${raw.rate}): slow start ramps up to renew.rate from below`));
  }
  if (problems.length > 0) throw new ConfigProblemsError(problems as [ConfigError, ...ConfigError[]]);
  const control: Control = {
    windows: Object.freeze(windows),
    freezes: Object.freeze(freezes),
    shortestLifetimeMs,
    slowStart: raw.start_rate === undefined ? undefined : Object.freeze({ startRate: raw.start_rate, increase: raw.rate_increase, successesPerStep: raw.successes_per_step }),
    abort: raw.abort_percentage === undefined ? undefined : Object.freeze({ percentage: raw.abort_percentage, minAttempts: raw.abort_min_attempts }),
  };
  if (raw.enabled && (windows.length > 0 || freezes.length > 0)) checkEveryLifetimeHasAWindow(raw, control, settings);
  return control;
}

function entriesOf(key: "renew.windows" | "renew.freezes", raw: RawRenew["windows"], problems: ConfigError[]): CalendarEntry[] {
  const entries: CalendarEntry[] = [];
  (raw ?? []).forEach((entry, index) => {
    const at = `${key}.${index}`;
    const before = problems.length;
    const unknown = Object.keys(entry).filter((name) => !ENTRY_KEYS.includes(name));
    if (unknown.length > 0) problems.push(new ConfigError(at, `has keys an entry does not take: ${unknown.join(", ")} (it takes ${ENTRY_KEYS.join(", ")})`));
    const cron = parseCron(entry.cron);
    if ("problems" in cron) for (const problem of cron.problems) problems.push(new ConfigError(`${at}.cron`, problem));
    const timezone = entry.timezone ?? "UTC";
    if (!isTimeZone(timezone)) problems.push(new ConfigError(`${at}.timezone`, `"${timezone.slice(0, 60)}" is not an IANA timezone (such as UTC, Europe/London or America/New_York)`));
    const durationMs = positive(`${at}.duration`, entry.duration, problems);
    if (durationMs !== undefined && (durationMs % MINUTE_MS !== 0 || durationMs > MAX_PERIOD_MS)) {
      problems.push(new ConfigError(`${at}.duration`, `must be whole minutes from 1m to 31d; got "${entry.duration}"`));
    }
    if (problems.length === before && "schedule" in cron && durationMs !== undefined) {
      entries.push(Object.freeze({ cron: cron.schedule, timezone, durationMs, duration: entry.duration }));
    }
  });
  return entries;
}

function positive(key: string, text: string, problems: ConfigError[]): number | undefined {
  try {
    const ms = parseDuration(text);
    if (ms > 0) return ms;
    problems.push(new ConfigError(key, `must be more than 0s; got "${text}"`));
  } catch (error) {
    problems.push(new ConfigError(key, `must be a duration such as 30m or 7d; got "${text.slice(0, 60)}"`, { cause: error }));
  }
  return undefined;
}

/**
 * cert-manager #9146 accepted renewal windows that could never be met. Here the longest stretch
 * the windows and freezes leave closed over a year must be shorter than the shortest renewal
 * window (from `renew.before` ahead of expiry to `renew.timeout` ahead of it, less one run), or
 * some credential could reach its expiry with no moment to renew in.
 */
function checkEveryLifetimeHasAWindow(raw: RawRenew, control: Control, settings: { before: RenewSection["before"]; timeoutMs: number; lifetimeMs: number | undefined; now: number }): void {
  const lifetimes = [settings.lifetimeMs, control.shortestLifetimeMs].filter((ms): ms is number => ms !== undefined);
  const lifetimeMs = lifetimes.length > 0 ? Math.min(...lifetimes) : undefined;
  const { before } = settings;
  if ("fraction" in before && lifetimeMs === undefined) {
    throw new ConfigError(
      "renew.shortest_lifetime",
      `is required with renew.windows or renew.freezes when renew.before (${raw.before}) is a percentage of a lifetime no other key gives (the helper's certificates, features.pki): the windows are checked against the shortest renewal window, which needs the shortest lifetime the site issues`,
    );
  }
  const leadMs = "ms" in before ? Math.min(before.ms, lifetimeMs ?? before.ms) : before.fraction * (lifetimeMs as number);
  const windowMs = leadMs - settings.timeoutMs;
  // A window not longer than renew.timeout is refused by the capacity check (renew-capacity.ts).
  if (windowMs <= RUN_MS) return;
  const calendar = new RenewCalendar(control.windows, control.freezes);
  const from = Math.floor(settings.now / MINUTE_MS) * MINUTE_MS;
  const gap = calendar.longestGap(from, from + CHECKED_SPAN_MS + windowMs);
  if (gap.ms + RUN_MS < windowMs) return;
  const lifetimeShown = lifetimeMs === undefined || "ms" in before ? "" : ` of the shortest lifetime ${formatDuration(lifetimeMs)} (${lifetimeMs === control.shortestLifetimeMs ? "renew.shortest_lifetime" : "server_jwt_validity"})`;
  const never = gap.ms >= CHECKED_SPAN_MS;
  throw new ConfigError(
    control.windows.length > 0 ? "renew.windows" : "renew.freezes",
    (never
      ? `renew.windows and renew.freezes leave no moment in a year when renewal may send: such windows can never be met`
      : `renew.windows and renew.freezes leave renewal no moment to send in for ${formatDuration(gap.ms)}, from ${iso(gap.startsAt)} to ${iso(gap.endsAt)}`) +
      `; the shortest renewal window (renew.before ${raw.before}${lifetimeShown} less renew.timeout ${raw.timeout}) is ${formatDuration(windowMs)}, so a credential expiring then would have no window before its expiry. ` +
      "Widen or add windows, shorten the freezes, or lengthen renew.before; a host that would still meet such a gap is renewed anyway before it expires (docs/renewal.md, \"Change control\")",
  );
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(".000Z", "Z");
}
