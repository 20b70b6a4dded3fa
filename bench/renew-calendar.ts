/**
 * What renewal's maintenance windows cost a function at start (lib/config/renew-control.ts checks
 * at every configuration load that the windows leave each lifetime a moment to renew in; lib/config/
 * renew-calendar.ts): a configuration with two windows and a freeze, in timezones with daylight
 * saving. Each of --runs fresh processes (a Lambda cold start is one) times its first load, then
 * ten more loads, then the renew function's first questions on a new calendar (allowedAt, and
 * nextAllowed from a closed minute); as many again load the same configuration with renewal off
 * (no check: what the check adds is the difference). Prints the median of each across the
 * processes. A figure, not a test: the time depends on the machine and what else it runs.
 *
 *   npm run bench:calendar [-- --runs 15]
 */
import { execFile } from "node:child_process";
import { loadavg } from "node:os";
import { promisify } from "node:util";
import { parseConfig } from "../lib/config/config";
import { RenewCalendar } from "../lib/config/renew-calendar";
import { parsedOptions, runBenchmark, wholeNumber } from "./command";
import { percentile } from "./measure";

const CONFIG = {
  site: "lon",
  helper_function: "choria-provisioner-helper",
  broker_urls: ["tls://broker.example.net:4222"],
  features: { jwt: true, ed25519: true },
  jwt_verify_cert: "3b2e7c0f4d8a1e6b5c9f2a7d0e4b8c1f6a3d9e2b7c0f5a8d1e4b7c2f9a6d3e0b",
  jwt_signing_key: "secretsmanager:choria/signing-key",
  server_jwt_validity: "30d",
  renew: {
    enabled: true,
    broker_urls: ["tls://main.example.net:4222"],
    windows: [
      { cron: "0 1 * * mon-fri", timezone: "Europe/London", duration: "4h" },
      { cron: "30 22 * * sat,sun", timezone: "America/New_York", duration: "6h" },
    ],
    freezes: [{ cron: "0 0 24 dec *", timezone: "Europe/Berlin", duration: "3d" }],
  },
};
const ENV = { STACK_DEPLOYMENT_ID: "d" };
const LOADS = 10;
const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

interface Sample {
  firstLoadMs: number;
  loadMs: number;
  renewMs: number;
}

/** One process's figures: its first load, the median of the next loads, the renew function's first questions. */
function sampleHere(checked: boolean): Sample {
  const document = checked ? CONFIG : { ...CONFIG, renew: { ...CONFIG.renew, enabled: false } };
  let started = performance.now();
  const config = parseConfig(document, { env: ENV });
  const firstLoadMs = performance.now() - started;
  const times: number[] = [];
  for (let load = 0; load < LOADS; load++) {
    started = performance.now();
    parseConfig(document, { env: ENV });
    times.push(performance.now() - started);
  }
  started = performance.now();
  const calendar = new RenewCalendar(config.renew.windows, config.renew.freezes);
  // A Wednesday at noon UTC: closed; the next window is 01:00 London the next night.
  const noon = Date.UTC(2027, 2, 10, 12);
  if (calendar.allowedAt(noon) || calendar.nextAllowed(noon, 32 * DAY_MS) === undefined || calendar.allowedAt(noon + 14 * MINUTE_MS)) {
    throw new Error("the calendar does not answer as the configuration says");
  }
  const renewMs = performance.now() - started;
  return { firstLoadMs, loadMs: percentile(times.sort((a, b) => a - b), 50) ?? Number.NaN, renewMs };
}

async function main(): Promise<void> {
  // --one (checked or not) is how this benchmark runs each of its fresh processes.
  const options = parsedOptions("bench:calendar", { runs: { type: "string" }, one: { type: "string" } });
  if (options.one !== undefined) {
    process.stdout.write(`${JSON.stringify(sampleHere(options.one === "checked"))}\n`);
    return;
  }
  const runs = wholeNumber("bench:calendar", "--runs", options.runs, 15);
  const samples = { checked: [] as Sample[], unchecked: [] as Sample[] };
  // The two kinds take turns, so the machine's load falls on both alike.
  for (let run = 0; run < 2 * runs; run++) {
    const kind = run % 2 === 0 ? "checked" : "unchecked";
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", import.meta.filename, "--one", kind]);
    samples[kind].push(JSON.parse(stdout) as Sample);
  }
  for (const [kind, list] of Object.entries(samples)) {
    const median = (pick: (sample: Sample) => number) => (percentile(list.map(pick).sort((a, b) => a - b), 50) ?? Number.NaN).toFixed(1);
    process.stdout.write(
      `${kind === "checked" ? "renewal on (checked)" : "renewal off (no check)"}, ${runs} processes: first load ${median((s) => s.firstLoadMs)} ms, ` +
        `later loads ${median((s) => s.loadMs)} ms, renew's first allowedAt/nextAllowed ${median((s) => s.renewMs)} ms (medians)\n`,
    );
  }
  process.stdout.write(`load average ${loadavg()[0]?.toFixed(2)}\n`);
}

runBenchmark("calendar benchmark", main);
