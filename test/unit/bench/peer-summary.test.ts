import { describe, expect, it } from "vitest";
import { parsePeerOptions, PeerOptionsError } from "../../../bench/peer-options";
import { summarise, type ComparableRun } from "../../../bench/peer-summary";

const run = (overrides: Partial<ComparableRun>): ComparableRun => ({
  side: "go",
  fleet: "simulator-1000",
  helper: "bash",
  setting: "workers 64",
  nodes: 1_000,
  restarted: 1_000,
  complete: true,
  hosts_per_min: 1_000,
  cpu_ms_per_host: 20,
  load_average_1m: { start: 1.2 },
  ...overrides,
});

describe("bench:peer summary", () => {
  it("gives the ratio per helper between complete runs that started on a quiet machine, and the highest start load", () => {
    // Arrange
    const runs = [
      run({ side: "go", hosts_per_min: 1_200 }),
      run({ side: "ours", setting: "10 x 10", hosts_per_min: 1_500, load_average_1m: { start: 1.9 } }),
      run({ side: "go", helper: "compiled", hosts_per_min: 2_000 }),
      run({ side: "ours", helper: "compiled", setting: "10 x 10", hosts_per_min: 5_000 }),
    ];

    // Act
    const [summary] = summarise(runs, 2);

    // Assert
    expect(summary).toMatchObject({ ratio_hosts_per_min: 1.25, ratio_hosts_per_min_compiled: 2.5, max_start_load: 1.9 });
    expect(summary?.not_comparable).toBeUndefined();
  });

  it("refuses a ratio from a run that started with the load above the core count, and says so", () => {
    // Arrange
    const runs = [run({ side: "go", hosts_per_min: 600, load_average_1m: { start: 5.6 } }), run({ side: "ours", hosts_per_min: 900 })];

    // Act
    const [summary] = summarise(runs, 2);

    // Assert
    expect(summary?.ratio_hosts_per_min).toBeNull();
    expect(summary?.max_start_load).toBe(5.6);
    expect(summary?.not_comparable).toEqual(["bash helper: Go's run started at load 5.6 on 2 cores: the machine was busy with other work, no ratio"]);
  });

  it("marks a fleet not comparable when one side's best run did not restart every node", () => {
    // Arrange
    const runs = [
      run({ side: "go", fleet: "simulator-5000", nodes: 5_000, restarted: 4_100, complete: false, hosts_per_min: 400 }),
      run({ side: "ours", fleet: "simulator-5000", nodes: 5_000, restarted: 5_000, hosts_per_min: 1_600 }),
    ];

    // Act
    const [summary] = summarise(runs, 2);

    // Assert
    expect(summary?.ratio_hosts_per_min).toBeNull();
    expect(summary?.not_comparable?.[0]).toContain("Go's run restarted 4100/5000: not comparable");
  });
});

describe("bench:peer options", () => {
  it("--help is recognised and nothing else is required", () => {
    expect(parsePeerOptions(["--help"], {}).help).toBe(true);
  });

  it("flags override the environment, which overrides the defaults", () => {
    // Act
    const options = parsePeerOptions(["--sizes", "200", "--ours", "5x10,10x20", "--helpers", "compiled"], { PEER_GO_WORKERS: "8,32", PEER_SIZES: "50" });

    // Assert
    expect(options).toMatchObject({
      sizes: [200],
      goWorkers: [8, 32],
      oursSettings: [
        { maxConcurrency: 5, workers: 10 },
        { maxConcurrency: 10, workers: 20 },
      ],
      helpers: ["compiled"],
      profile: true,
      loadWaitS: 60,
    });
  });

  it("an unknown flag or a malformed value is a PeerOptionsError naming it", () => {
    expect(() => parsePeerOptions(["--bogus"], {})).toThrow(PeerOptionsError);
    expect(() => parsePeerOptions(["--ours", "10"], {})).toThrow('--ours takes <concurrency>x<workers> pairs such as 10x10, got "10"');
    expect(() => parsePeerOptions(["--ours=10x10,-1x5"], {})).toThrow('--ours takes <concurrency>x<workers> pairs such as 10x10, got "-1x5"');
    expect(() => parsePeerOptions(["--helpers", "python"], {})).toThrow('--helpers takes bash and/or compiled, got "python"');
    expect(() => parsePeerOptions(["--real-fleet", "2.5"], {})).toThrow('--real-fleet takes a whole number >= 0, got "2.5"');
    expect(() => parsePeerOptions(["--real-fleet-rounds", "0"], {})).toThrow('--real-fleet-rounds takes a whole number > 0, got "0"');
    expect(() => parsePeerOptions(["--real-fleet", "0", "--real-fleet-only"], {})).toThrow("--real-fleet-only needs --real-fleet above 0");
  });

  it("runs 3 rounds of 50 real servers unless told otherwise", () => {
    expect(parsePeerOptions([], {})).toMatchObject({ realFleetNodes: 50, realFleetRounds: 3, realFleetOnly: false });
    expect(parsePeerOptions(["--real-fleet", "50", "--real-fleet-only"], { PEER_REAL_FLEET_ROUNDS: "2" })).toMatchObject({ realFleetNodes: 50, realFleetRounds: 2, realFleetOnly: true });
  });
});
