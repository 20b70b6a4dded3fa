/**
 * The local run's view of the admission registry: each host's state and claim, read straight from
 * the table (as an operator would look at it), and what a run that is not moving waits for, in
 * words, one group of hosts per cause: "6 hosts in an attempt (claimed by a running invocation,
 * admitted 3 m ago)", "2 hosts given back after an error, next try by 17:04:10".
 */
import { createDynamoDbClient, type AttributeValue } from "../../lib/dynamodb/client";
import { querySite } from "../../lib/dynamodb/site-query";

export interface RegistryRow {
  identity: string;
  term: number;
  state: string;
  admittedAt?: number;
  claimedUntil?: number;
  heldUntil?: number;
  lastError?: string;
  lastErrorAt?: number;
  failedStep?: string;
  failures?: number;
}

const FIELDS = ["identity", "term", "state", "admittedAt", "claimedUntil", "heldUntil", "lastError", "lastErrorAt", "failedStep", "failures"] as const;

export function registryView(options: { endpoint: string; region: string; credentials: { accessKeyId: string; secretAccessKey: string }; table: string; site: string }) {
  const client = createDynamoDbClient({ endpoint: options.endpoint, region: options.region, credentials: options.credentials });
  return {
    async rows(): Promise<RegistryRow[]> {
      return (await querySite(client, { tableName: options.table, site: options.site, attributes: FIELDS })).map(decode);
    },
    close: () => client.destroy(),
  };
}

function decode(item: Record<string, AttributeValue>): RegistryRow {
  const number = (name: string) => (item[name]?.N === undefined ? undefined : Number(item[name]?.N));
  const row: RegistryRow = { identity: item.identity?.S ?? "", term: number("term") ?? 0, state: item.state?.S ?? "queued" };
  for (const name of ["admittedAt", "claimedUntil", "heldUntil", "lastErrorAt", "failures"] as const) {
    const value = number(name);
    if (value !== undefined) row[name] = value;
  }
  if (item.lastError?.S !== undefined) row.lastError = item.lastError.S;
  if (item.failedStep?.S !== undefined) row.failedStep = item.failedStep.S;
  return row;
}

/** Beyond this a moment is shown with its date: a 14-day park shown as a time of day reads as one already past. */
const HALF_DAY_MS = 12 * 3_600_000;

/** A moment as the live line and the summary show it (UTC, as the event lines' timestamps). */
function moment(epochMs: number, now: number): string {
  const iso = new Date(epochMs).toISOString();
  return Math.abs(epochMs - now) < HALF_DAY_MS ? iso.slice(11, 19) : `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

function span(ms: number): string {
  if (ms < 60_000) return `${Math.max(0, Math.round(ms / 1000))} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} m`;
  if (ms < 2 * 24 * 3_600_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${Math.round(ms / (24 * 3_600_000))} days`;
}

/** One host's registry entry as the summary shows it. */
export function describeRow(row: RegistryRow | undefined, now: number): string {
  if (!row) return "not in the registry";
  const parts = [`${row.state} (term ${row.term})`];
  if (row.claimedUntil !== undefined) {
    parts.push(row.claimedUntil > now ? `claimed until ${moment(row.claimedUntil, now)}` : `claim ran out at ${moment(row.claimedUntil, now)}`);
  }
  if (row.heldUntil !== undefined && row.heldUntil > now) parts.push(`held until ${moment(row.heldUntil, now)} (in ${span(row.heldUntil - now)})`);
  if (row.admittedAt !== undefined) parts.push(`admitted ${span(now - row.admittedAt)} ago`);
  return parts.join(", ");
}

/** A group of the hosts not yet provisioned that wait for the same thing. */
export interface WaitGroup {
  hosts: number;
  /** In full, and in a few words for a narrow terminal. */
  text: string;
  short: string;
  /** The newest last error of its hosts, where one is the cause. */
  lastError?: string;
}

export interface WaitContext {
  now: number;
  /** The lease as last read. */
  lease?: { holder: string; term: number; expiresAt: number } | undefined;
  /** Deployments the run crashed (--kill-leader-after). */
  crashed: readonly string[];
  /** The longest a host given back waits for its work's next delivery (RETRY_MAX_DELAY_SECONDS). */
  retryMaxDelayMs: number;
}

type Cause =
  | "attempt"
  | "claimed-by-crashed"
  | "claimed-old-term"
  | "lapsed"
  | "restarting"
  | "given-back"
  | "failed"
  | "queued"
  | "parked"
  | "unknown"
  | "other";

/** What one unfinished host waits for, by its registry entry. A live claim is an attempt under way unless its claimer is gone. */
function causeOf(row: RegistryRow | undefined, context: WaitContext): Cause {
  const { now, lease } = context;
  if (!row) return "unknown";
  if (row.state === "parked") return "parked";
  if (row.claimedUntil !== undefined && row.claimedUntil > now) {
    if (lease && row.term < lease.term) return "claimed-old-term";
    if (lease && row.term === lease.term && context.crashed.includes(lease.holder)) return "claimed-by-crashed";
    return "attempt";
  }
  if (row.claimedUntil !== undefined) return "lapsed";
  if (row.state === "provisioned") return "restarting";
  if (row.state === "failed") return "failed";
  if (row.lastError !== undefined) return "given-back";
  return row.state === "queued" ? "queued" : "other";
}

const hosts = (count: number) => `${count} host${count === 1 ? "" : "s"}`;

/** The newest last error of `rows`, bounded: the progress names the cause, the summary has each in full. */
function newestError(rows: readonly RegistryRow[]): string {
  const newest = rows.reduce<RegistryRow | undefined>((found, row) => ((row.lastErrorAt ?? 0) >= (found?.lastErrorAt ?? 0) ? row : found), undefined)?.lastError ?? "unknown";
  return newest.length > 200 ? `${newest.slice(0, 199)}…` : newest;
}

function describeGroup(cause: Cause, rows: readonly RegistryRow[], context: WaitContext): Omit<WaitGroup, "hosts"> {
  const { now, lease } = context;
  const count = rows.length;
  // A reduce, not Math.min(...): a group may hold more hosts than a call takes arguments.
  const earliest = (values: Array<number | undefined>) => values.reduce<number>((min, value) => (value !== undefined && value < min ? value : min), Infinity);
  switch (cause) {
    case "attempt": {
      const oldest = earliest(rows.map((row) => row.admittedAt));
      const age = Number.isFinite(oldest) ? `, the oldest admitted ${span(now - oldest)} ago` : "";
      return { text: `${hosts(count)} being provisioned by a running invocation${age}`, short: `${count} being provisioned` };
    }
    case "claimed-by-crashed": {
      const runsOut = lease && lease.expiresAt > now ? `at ${moment(lease.expiresAt, now)}` : "now";
      return {
        text: `${hosts(count)} claimed by ${lease?.holder}, which crashed: a standby takes over once its lease runs out (${runsOut})`,
        short: `${count} claimed by crashed ${lease?.holder}`,
      };
    }
    case "claimed-old-term": {
      const term = earliest(rows.map((row) => row.term));
      return {
        text: `${hosts(count)} claimed under term ${term}, before the takeover: the term ${lease?.term} leader admits them again at its next discovery`,
        short: `${count} claimed under term ${term}`,
      };
    }
    case "lapsed":
      return {
        text: `${hosts(count)} whose claim ran out at ${moment(earliest(rows.map((row) => row.claimedUntil)), now)} or later: the next discovery admits them again`,
        short: `${count} claim ran out`,
      };
    case "restarting":
      return { text: `${hosts(count)} provisioned, restart not acknowledged yet`, short: `${count} restarting` };
    case "given-back": {
      const retryBy = moment(rows.reduce((latest, row) => Math.max(latest, row.lastErrorAt ?? now), 0) + context.retryMaxDelayMs, now);
      return { text: `${hosts(count)} to retry by ${retryBy}`, short: `${count} to retry by ${retryBy}`, lastError: newestError(rows) };
    }
    case "failed":
      return { text: `${hosts(count)} failed, admitted again at the next discovery`, short: `${count} failed`, lastError: newestError(rows) };
    case "queued":
      return { text: `${hosts(count)} queued (admitted, work not taken yet)`, short: `${count} queued` };
    case "parked":
      return { text: `${hosts(count)} parked in the DLQ`, short: `${count} parked`, lastError: newestError(rows) };
    case "unknown":
      return { text: `${hosts(count)} not admitted yet (waiting for discovery or a startup event)`, short: `${count} not admitted` };
    case "other":
      return { text: `${hosts(count)} ${[...new Set(rows.map((row) => row.state))].join(" or ")}`, short: `${count} ${rows[0]?.state}` };
  }
}

/** The causes a person can act on or should know first come first; parked hosts, which wait for nothing, last. */
const CAUSE_ORDER: readonly Cause[] = [
  "claimed-by-crashed",
  "claimed-old-term",
  "given-back",
  "failed",
  "lapsed",
  "attempt",
  "restarting",
  "queued",
  "unknown",
  "parked",
  "other",
];

/**
 * What the hosts not yet provisioned wait for, one group per cause, from their registry entries;
 * the groups add up to `unfinished`. Hosts the registry does not know yet wait for discovery or
 * their startup event.
 */
export function describeWait(unfinished: readonly string[], rows: ReadonlyMap<string, RegistryRow>, context: WaitContext): WaitGroup[] {
  const byCause = new Map<Cause, RegistryRow[]>();
  for (const identity of unfinished) {
    const row = rows.get(identity);
    const cause = causeOf(row, context);
    const group = byCause.get(cause) ?? [];
    group.push(row ?? { identity, term: 0, state: "unknown" });
    byCause.set(cause, group);
  }
  return CAUSE_ORDER.flatMap((cause) => {
    const group = byCause.get(cause);
    return group ? [{ hosts: group.length, ...describeGroup(cause, group, context) }] : [];
  });
}

/** What a run whose hosts are all provisioned waits for after crashing the leader: the standby's takeover. */
export function describeTakeover(lease: { holder: string; expiresAt: number }, now: number): WaitGroup {
  const runsOut = lease.expiresAt > now ? `runs out at ${moment(lease.expiresAt, now)}` : "ran out";
  return { hosts: 0, text: `a standby to take over from ${lease.holder}, whose lease ${runsOut}`, short: "the takeover" };
}
