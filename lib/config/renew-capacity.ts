/**
 * Whether renewal (docs/renewal.md, "Capacity") can ever keep up with the credential lifetime a
 * configuration sets, as check-config says it before anything is deployed: a window too short for
 * even one host, a `renew.before` that makes every host due the moment it is provisioned, and the
 * largest fleet the rate and window can renew. The fleet's own expiries are judged at run time by
 * lib/app/renewal-capacity.ts, which takes the sustained rate from here so both say the same.
 */
import { parseRenewBefore } from "./sections";
import type { RenewSection } from "./types";
import { CONFIG_KEYS } from "./keys";
import { parseDuration } from "./duration";
import { RenewCalendar } from "./renew-calendar";
import { renewControlOf } from "./renew-control";

const MINUTE_MS = 60_000;
/** The `renew` function runs once a minute (serverless.yml): a host due now is sent at the next run at the latest. */
export const RENEW_RUN_MS = MINUTE_MS;
/**
 * Hosts of one expiry are placed over the first half of their window (lib/app/renewal-state.ts
 * `renewableAt`): the second half is kept for retries and slack.
 */
export const SPREAD_SHARE = 0.5;
/**
 * How long a renewed host holds its place in flight until renewal has seen it: a go-choria node is
 * back within seconds of reprovision, and the next run (a minute later) or the one after settles
 * it. The run-time check uses what it measured instead, once it has enough renewals to go by.
 */
export const ASSUMED_OUT_OF_SERVICE_MS = 2 * MINUTE_MS;

export interface RenewRateSettings {
  ratePerMinute: number;
  maxInFlight: number;
  /** How long one renewed host holds its place in flight (measured, or ASSUMED_OUT_OF_SERVICE_MS). */
  outOfServiceMs: number;
}

/** Sends renewal can sustain: `sends` every `everyMs` ms, `perMinute` a minute. */
export interface SustainedRenewRate {
  sends: number;
  everyMs: number;
  perMinute: number;
  /** The setting that sets it: the rate itself, or the bound on hosts out of service. */
  limitedBy: "renew.rate" | "renew.max_in_flight";
}

/**
 * min(renew.rate, renew.max_in_flight / the time one host holds its place in minutes). Taking the
 * whole `renew.timeout` for that time would call a site that renews comfortably short of capacity
 * (50 in flight over 15 minutes is 3.3 a minute, where nodes back in a minute give 25): the alarm
 * would cry wolf. So the run-time check takes what it measured, and check-config an assumption it
 * states.
 */
export function sustainedRenewRate({ ratePerMinute, maxInFlight, outOfServiceMs }: RenewRateSettings): SustainedRenewRate {
  // Compared as products so a rate that equals the bound picks the rate, exactly.
  if (maxInFlight * MINUTE_MS < ratePerMinute * outOfServiceMs) {
    return { sends: maxInFlight, everyMs: outOfServiceMs, perMinute: (maxInFlight * MINUTE_MS) / outOfServiceMs, limitedBy: "renew.max_in_flight" };
  }
  return { sends: ratePerMinute, everyMs: MINUTE_MS, perMinute: ratePerMinute, limitedBy: "renew.rate" };
}

export interface RenewCapacityProblem {
  kind: "error" | "warning";
  /** The YAML key the fix is most likely in; the message names the others involved. */
  key: string;
  message: string;
}

interface RenewPlan extends RenewRateSettings {
  before: { ms: number; text: string } | { fraction: number; text: string };
  timeoutMs: number;
  timeoutText: string;
  /** The credentials' lifetime when the configuration sets it: the server JWT the provisioner signs (features.ed25519). */
  lifetime?: { ms: number; text: string };
}

/**
 * The capacity problems of a YAML document (as check-config reads it), only with `renew.enabled`:
 * without it nothing is renewed on a schedule, and an operator's `renew` picks its own hosts. Read
 * from the document rather than the parsed configuration so they are reported in the same run as
 * every other problem; a renew key that does not parse is reported by parseConfig, and then these
 * checks, which need it, say nothing.
 */
export function renewCapacityProblems(document: Record<string, unknown>): RenewCapacityProblem[] {
  const plan = renewPlanOf(document);
  if (!plan) return [];
  const problems: RenewCapacityProblem[] = [];
  const { before, lifetime, timeoutMs } = plan;
  const lifetimeShown = lifetime ? `the credentials' lifetime (server_jwt_validity ${lifetime.text})` : "";
  if ("ms" in before && lifetime && before.ms >= lifetime.ms) {
    problems.push({
      kind: "error",
      key: "renew.before",
      message: `${before.text} is not shorter than ${lifetimeShown}: every host would be due again the moment it is provisioned, and renewed over and over; give a shorter duration or a percentage of the lifetime`,
    });
  }
  const windowMs = "ms" in before ? Math.min(before.ms, lifetime?.ms ?? Number.POSITIVE_INFINITY) : lifetime && before.fraction * lifetime.ms;
  // A percentage of a lifetime the helper decides (pki certificates) is known only at run time.
  if (windowMs === undefined) return problems;
  const windowShown = "ms" in before ? `renew.before ${before.text}` : `renew.before ${before.text} of ${lifetimeShown} = ${shownDuration(windowMs)}`;
  if (windowMs <= timeoutMs + RENEW_RUN_MS) {
    problems.push({
      kind: "error",
      key: "renew.timeout",
      message: `the renewal window (${windowShown}) is not longer than renew.timeout (${plan.timeoutText}) plus one renew run (1m): not one host can be sent reprovision and be back before its credentials expire; lengthen renew.before or shorten renew.timeout`,
    });
    return problems;
  }
  if (windowMs * SPREAD_SHARE <= timeoutMs + RENEW_RUN_MS) {
    problems.push({
      kind: "warning",
      key: "renew.before",
      message: `hosts are placed over the first half of the renewal window (${windowShown}), and from its middle on less than renew.timeout (${plan.timeoutText}) plus one renew run (1m) is left: hosts placed late in it may still be out of service when their credentials expire; lengthen renew.before`,
    });
  }
  problems.push(fleetWarning(plan, windowMs, windowShown));
  return problems;
}

/** The largest fleet the configuration renews when all its hosts share one expiry (provisioned together). */
function fleetWarning(plan: RenewPlan, windowMs: number, windowShown: string): RenewCapacityProblem {
  const rate = sustainedRenewRate(plan);
  // From the exact fraction (sends every everyMs): 50 per 15 minutes over 3 days is 14,400, not 14,399.
  const spread = Math.floor((rate.sends * windowMs * SPREAD_SHARE) / rate.everyMs);
  const beforeExpiry = Math.floor((rate.sends * (windowMs - plan.timeoutMs)) / rate.everyMs);
  const rateShown =
    rate.limitedBy === "renew.rate"
      ? `renew.rate ${plan.ratePerMinute} a minute`
      : `${shownNumber(rate.perMinute)} a minute (renew.max_in_flight ${plan.maxInFlight} hosts, each holding its place about ${shownDuration(plan.outOfServiceMs)}; renew.rate ${plan.ratePerMinute} is not reached)`;
  return {
    kind: "warning",
    key: rate.limitedBy,
    message:
      `renewal keeps up with at most ${shownCount(spread)} hosts that share one expiry (provisioned together): ${rateShown} over the first half of the window (${windowShown}), where such hosts are placed; ` +
      `a larger fleet falls into the second half, kept for retries, and beyond ${shownCount(beforeExpiry)} hosts (the whole window less renew.timeout) some expire before they are renewed. ` +
      "For a larger fleet raise renew.rate or renew.max_in_flight, or lengthen renew.before",
  };
}

/** The settings the checks need, or undefined when renewal is off or one of them does not parse (parseConfig reports it). */
function renewPlanOf(document: Record<string, unknown>): RenewPlan | undefined {
  const renew = CONFIG_KEYS.renew.schema.safeParse(withoutNulls(document.renew));
  if (!renew.success || !renew.data.enabled) return undefined;
  const before = renewBeforeOf(renew.data.before);
  const timeoutMs = durationOf(renew.data.timeout);
  if (!before || timeoutMs === undefined) return undefined;
  const plan: RenewPlan = {
    before,
    timeoutMs,
    timeoutText: renew.data.timeout,
    ratePerMinute: renew.data.rate,
    maxInFlight: renew.data.max_in_flight,
    outOfServiceMs: ASSUMED_OUT_OF_SERVICE_MS,
  };
  const features = CONFIG_KEYS.features.schema.safeParse(withoutNulls(document.features));
  const validity = CONFIG_KEYS.server_jwt_validity.schema.safeParse(document.server_jwt_validity ?? undefined);
  if (!features.success || !validity.success) return undefined;
  // With ed25519 the provisioner signs the server JWT, valid server_jwt_validity (a helper's
  // server_claims.exp may shorten it per host, which only the run-time check sees); with pki the
  // helper's certificate sets the lifetime, which no configuration key says.
  if (features.data.ed25519) {
    const lifetimeMs = durationOf(validity.data);
    if (lifetimeMs === undefined) return undefined;
    plan.lifetime = { ms: lifetimeMs, text: validity.data };
  }
  return plan;
}

/** parseConfig's reading of `renew.before`, with its text; undefined where parseConfig reports it. */
function renewBeforeOf(text: string): RenewPlan["before"] | undefined {
  try {
    return { ...parseRenewBefore(text), text };
  } catch {
    return undefined;
  }
}

/**
 * The renew settings of a YAML document, enabled or not, for a tool that reads the file without
 * loading the whole configuration (the operator CLI's `--config`); undefined when one does not parse.
 */
export function renewSettingsOf(
  document: Record<string, unknown>,
): { before: RenewSection["before"]; ratePerMinute: number; maxInFlight: number; timeoutMs: number; calendar?: RenewCalendar } | undefined {
  const renew = CONFIG_KEYS.renew.schema.safeParse(withoutNulls(document.renew));
  if (!renew.success) return undefined;
  const before = renewBeforeOf(renew.data.before);
  const timeoutMs = durationOf(renew.data.timeout);
  if (!before || timeoutMs === undefined) return undefined;
  const { text: _text, ...window } = before;
  const settings = { before: window, ratePerMinute: renew.data.rate, maxInFlight: renew.data.max_in_flight, timeoutMs };
  try {
    // Only the windows and freezes as written: the check that they leave every lifetime a window is check-config's.
    const control = renewControlOf({ ...renew.data, enabled: false }, { before: window, timeoutMs, lifetimeMs: undefined, now: 0 });
    return { ...settings, calendar: new RenewCalendar(control.windows, control.freezes) };
  } catch {
    return settings;
  }
}

/** A positive duration, or undefined (parseConfig names the key). */
function durationOf(text: string): number | undefined {
  try {
    const ms = parseDuration(text);
    return ms > 0 ? ms : undefined;
  } catch {
    return undefined;
  }
}

/** parseConfig drops null values (a key written with nothing after it) before validating; so do the checks. */
function withoutNulls(value: unknown): unknown {
  if (value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).filter(([, entry]) => entry !== null));
}

const DURATION_UNITS: ReadonlyArray<readonly [string, number]> = [
  ["d", 24 * 3_600_000],
  ["h", 3_600_000],
  ["m", MINUTE_MS],
  ["s", 1_000],
];

/** `73d`, `1.5h`: the largest unit of at least one, to two decimals at most. */
function shownDuration(ms: number): string {
  const [unit, size] = DURATION_UNITS.find(([, unitMs]) => ms >= unitMs) ?? ["ms", 1];
  return `${shownNumber(ms / size)}${unit}`;
}

function shownNumber(value: number): string {
  return String(Math.round(value * 100) / 100);
}

/** 43200 as 43,200, whatever the machine's locale. */
function shownCount(count: number): string {
  return String(count).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}
