import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { UsageError } from "../../../bench/command";
import { parsePeerOptions } from "../../../bench/peer-options";
import { median } from "../../../bench/measure";
import { orderOf, pairOf, summarise, type Pair, type PairedRun } from "../../../bench/peer-summary";

const ROOT = resolve(import.meta.dirname, "../../..");

const run = (overrides: Partial<PairedRun> = {}): PairedRun => ({
  nodes: 1_000,
  restarted: 1_000,
  complete: true,
  hosts_per_min: 1_000,
  start_load: 0.8,
  steal_pct: 0.5,
  admission_to_restart_ms: { p99: 4_000 },
  discovery_to_restart_ms: { p99: 30_000 },
  ...overrides,
});

const gates = { maxStartLoad: 1.5, maxSteal: 3 };
const where = (slot: number, overrides: Partial<Pick<Pair, "helper" | "config" | "attempt">> = {}) => ({
  fleet: "simulator-1000",
  helper: "compiled" as const,
  config: "default" as const,
  slot,
  attempt: 1,
  ...overrides,
});

describe("bench:peer pairs", () => {
  it("alternates the order: Go first in odd slots, ours first in even ones (ABBA)", () => {
    expect([1, 2, 3, 4].map(orderOf)).toEqual(["go-first", "ours-first", "go-first", "ours-first"]);
  });

  it("gives a pair ours' hosts/min over Go's, the higher start load and steal of its runs, and whether ours' p99 from discovery is below Go's", () => {
    // Act
    const pair = pairOf(where(2), run({ hosts_per_min: 800, start_load: 1.1, discovery_to_restart_ms: { p99: 40_000 } }), run({ hosts_per_min: 1_000, steal_pct: 1.2 }), gates);

    // Assert
    expect(pair).toMatchObject({ ratio: 1.25, order: "ours-first", start_load: 1.1, steal_pct: 1.2, go_p99_discovery_ms: 40_000, ours_p99_discovery_ms: 30_000, ours_p99_discovery_below_go: true, counted: true });
    expect(pair.refused).toBeUndefined();
  });

  it("refuses a pair whose run started above the load gate or whose steal passed its bound, and says which", () => {
    // Act
    const busy = pairOf(where(1), run({ start_load: 1.9 }), run(), gates);
    const stolen = pairOf(where(1), run(), run({ steal_pct: 9.5 }), gates);

    // Assert
    expect(busy).toMatchObject({ counted: false, refused: "Go's run started at load 1.9 (gate 1.5)" });
    expect(stolen).toMatchObject({ counted: false, refused: "CPU steal 9.5 % over ours' run (bound 3 %)" });
  });

  it("does not count a pair where a side did not restart every node, and says why", () => {
    // Act
    const pair = pairOf(where(1), run({ restarted: 900, complete: false }), run(), gates);

    // Assert
    expect(pair.counted).toBe(false);
    expect(pair.refused).toBeUndefined();
    expect(pair.not_counted).toBe("Go's run restarted 900/1000: a ratio needs two runs that both restarted every node");
  });

  it("takes the median of an odd and an even count", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeUndefined();
  });
});

describe("bench:peer fleet summary", () => {
  const ratioPair = (slot: number, oursRate: number, overrides: Partial<Pick<Pair, "helper" | "config" | "attempt">> = {}, ours: Partial<PairedRun> = {}) =>
    pairOf(where(slot, overrides), run(), run({ hosts_per_min: oursRate, ...ours }), gates);

  it("gives the median ratio per helper over the counted default pairs, with the spread, leaving refused pairs out", () => {
    // Arrange
    const pairs = [
      ratioPair(1, 2_000),
      ratioPair(2, 3_000, {}, { start_load: 2.5 }),
      ratioPair(2, 2_600, { attempt: 2 }),
      ratioPair(3, 2_200),
      ...[1, 2, 3].map((slot) => ratioPair(slot, 1_100 + slot * 100, { helper: "bash" })),
    ];

    // Act
    const [summary] = summarise(pairs);

    // Assert
    expect(summary).toMatchObject({ fleet: "simulator-1000", median_ratio_hosts_per_min_compiled: 2.2, median_ratio_hosts_per_min: 1.3, every_host_restarted: true, max_start_load: 2.5, slots_left_refused: 0 });
    expect(summary?.spread.compiled).toEqual({ median: 2.2, min: 2, max: 2.6, counted: 3 });
    expect(summary?.tuned_median_ratio_hosts_per_min).toBeUndefined();
  });

  it("gives no median from fewer than 3 counted pairs, says why, and reports a slot refused on every attempt", () => {
    // Arrange
    const pairs = [ratioPair(1, 2_000), ratioPair(2, 2_000), ...[1, 2, 3].map((attempt) => ratioPair(3, 2_000, { attempt }, { steal_pct: 12 }))];

    // Act
    const [summary] = summarise(pairs);

    // Assert
    expect(summary?.median_ratio_hosts_per_min_compiled).toBeNull();
    expect(summary?.spread.compiled.reason).toBe("2 counted pair(s) of 5 run (refused or incomplete pairs are not counted); a median needs 3");
    expect(summary?.slots_left_refused).toBe(1);
  });

  it("summarises tuned pairs apart, and takes ours' worst p99 from discovery over the compiled default pairs", () => {
    // Arrange
    const pairs = [
      ...[1, 2, 3].map((slot) => ratioPair(slot, 2_000, {}, { discovery_to_restart_ms: { p99: 10_000 * slot } })),
      ...[1, 2, 3].map((slot) => ratioPair(slot, 3_000, { config: "tuned" })),
    ];

    // Act
    const [summary] = summarise(pairs);

    // Assert
    expect(summary).toMatchObject({ median_ratio_hosts_per_min_compiled: 2, tuned_median_ratio_hosts_per_min_compiled: 3, p99_from_discovery_ms: 30_000, p99_below_go_every_pair: false });
  });
});

describe("bench:peer options", () => {
  it("--help is recognised and nothing else is required", () => {
    expect(parsePeerOptions(["--help"], {}).help).toBe(true);
  });

  it("flags override the environment, which overrides the defaults", () => {
    // Act
    const options = parsePeerOptions(["--sizes", "200", "--tuned", "20x20", "--helpers", "compiled", "--pairs", "5"], { PEER_GO_WORKERS: "64", PEER_SIZES: "50", PEER_MAX_STEAL: "5" });

    // Assert
    expect(options).toMatchObject({ sizes: [200], goWorkers: 64, tuned: { maxConcurrency: 20, workers: 20 }, helpers: ["compiled"], pairs: 5, profile: true, maxSteal: 5 });
  });

  it("defaults to 3 pairs at 1,000 and 5,000 nodes, Go at 256 workers, no tuned config, gates at load 1.5 and 3 % steal, both sides warmed", () => {
    expect(parsePeerOptions([], {})).toMatchObject({
      sizes: [1_000, 5_000],
      pairs: 3,
      goWorkers: 256,
      tuned: undefined,
      maxStartLoad: 1.5,
      maxSteal: 3,
      loadWaitS: 120,
      warmUpNodes: 200,
      storeDelayMs: 0,
      noCliffNodes: undefined,
    });
  });

  it("takes the start gate, the steal bound, a store delay and the no-cliff fleet", () => {
    expect(parsePeerOptions(["--max-start-load", "9", "--max-steal", "100", "--store-delay-ms", "600", "--no-cliff", "5000", "--warm-up", "0"], {})).toMatchObject({
      maxStartLoad: 9,
      maxSteal: 100,
      storeDelayMs: 600,
      noCliffNodes: 5_000,
      warmUpNodes: 0,
    });
  });

  it("an unknown flag or a malformed value is a usage mistake of bench:peer naming it", () => {
    expect(() => parsePeerOptions(["--bogus"], {})).toThrow(UsageError);
    expect(() => parsePeerOptions(["--ours", "10x10"], {})).toThrow("bench:peer: Unknown option '--ours'");
    expect(() => parsePeerOptions(["--sizes", "1000,many"], {})).toThrow("bench:peer: --sizes must be whole numbers of at least 1 separated by commas, not 1000,many");
    expect(() => parsePeerOptions(["--tuned", "20"], {})).toThrow("bench:peer: --tuned takes <concurrency>x<workers> such as 10x10, not 20");
    expect(() => parsePeerOptions(["--go-workers", "64,256"], {})).toThrow("bench:peer: --go-workers must be a whole number of at least 1, not 64,256");
    expect(() => parsePeerOptions(["--pairs", "0"], {})).toThrow("bench:peer: --pairs must be a whole number of at least 1, not 0");
    expect(() => parsePeerOptions(["--max-steal=-1"], {})).toThrow("bench:peer: --max-steal must be a number of at least 0, not -1");
    expect(() => parsePeerOptions(["--max-start-load", ""], {})).toThrow("bench:peer: --max-start-load must be a number of at least 0, not ");
    expect(() => parsePeerOptions(["--timeout", "soon"], {})).toThrow("bench:peer: --timeout must be a number of at least 0, not soon");
    expect(() => parsePeerOptions(["--store-delay-ms", "1.5"], {})).toThrow("bench:peer: --store-delay-ms must be a whole number of at least 0, not 1.5");
    expect(() => parsePeerOptions(["--no-cliff", "0"], {})).toThrow("bench:peer: --no-cliff must be a whole number of at least 1, not 0");
    expect(() => parsePeerOptions(["--helpers", "python"], {})).toThrow("bench:peer: --helpers takes bash and/or compiled, not python");
    expect(() => parsePeerOptions(["--real-fleet", "2.5"], {})).toThrow("bench:peer: --real-fleet must be a whole number of at least 0, not 2.5");
    expect(() => parsePeerOptions(["--real-fleet-rounds", "0"], {})).toThrow("bench:peer: --real-fleet-rounds must be a whole number of at least 1, not 0");
    expect(() => parsePeerOptions(["--real-fleet", "0", "--real-fleet-only"], {})).toThrow("bench:peer: --real-fleet-only needs --real-fleet above 0");
  });

  it("a malformed environment variable is a usage mistake naming the variable, not the flag it stands in for", () => {
    expect(() => parsePeerOptions([], { PEER_PAIRS: "0" })).toThrow("bench:peer: PEER_PAIRS must be a whole number of at least 1, not 0");
    expect(() => parsePeerOptions([], { PEER_SIZES: "1000,x" })).toThrow("bench:peer: PEER_SIZES must be whole numbers of at least 1 separated by commas, not 1000,x");
    expect(() => parsePeerOptions([], { PEER_MAX_START_LOAD: "high" })).toThrow("bench:peer: PEER_MAX_START_LOAD must be a number of at least 0, not high");
    expect(() => parsePeerOptions([], { PEER_TIMEOUT_S: "-1" })).toThrow("bench:peer: PEER_TIMEOUT_S must be a number of at least 0, not -1");
    // The flag wins over a malformed variable.
    expect(parsePeerOptions(["--pairs", "4"], { PEER_PAIRS: "0" }).pairs).toBe(4);
  });

  it("reads and writes its reports in reports/ unless --report-dir says where, from the repository root", () => {
    expect(parsePeerOptions([], {}).reportDir).toBe(resolve(ROOT, "reports"));
    expect(parsePeerOptions(["--report-dir", "/tmp/peer-copy"], {}).reportDir).toBe("/tmp/peer-copy");
    expect(parsePeerOptions(["--report-dir", "elsewhere"], {}).reportDir).toBe(resolve(ROOT, "elsewhere"));
  });

  it("keeps every process on every CPU unless --stand-ins-apart, which pins the simulator pairs only", () => {
    expect(parsePeerOptions([], {}).standInsApart).toBe(false);
    expect(parsePeerOptions(["--stand-ins-apart", "--real-fleet", "0"], {}).standInsApart).toBe(true);
    const onlyPairs = "bench:peer: --stand-ins-apart pins the simulator pairs only: give --real-fleet 0 and no --no-cliff";
    expect(() => parsePeerOptions(["--stand-ins-apart"], {})).toThrow(onlyPairs);
    expect(() => parsePeerOptions(["--stand-ins-apart", "--real-fleet", "0", "--no-cliff", "5000"], {})).toThrow(onlyPairs);
  });

  it("runs 3 rounds of 50 real servers unless told otherwise", () => {
    expect(parsePeerOptions([], {})).toMatchObject({ realFleetNodes: 50, realFleetRounds: 3, realFleetOnly: false });
    expect(parsePeerOptions(["--real-fleet", "50", "--real-fleet-only"], { PEER_REAL_FLEET_ROUNDS: "2" })).toMatchObject({ realFleetNodes: 50, realFleetRounds: 2, realFleetOnly: true });
  });
});
