/**
 * reports/peer.md's findings, from a report's runs: each median ratio is judged against its own
 * goal (1.3x with the bash + jq helper, 2x compiled), and a goal not met is turned into the CPU per
 * host ours would need. The bash + jq goal used to be read as 1x, so a 1.22x median was "goal met".
 */
import { describe, expect, it } from "vitest";
import { markdown, type Report, type RunResult } from "../../../bench/peer-report";
import { summariseFleet } from "../../../bench/peer-summary";

/** A complete run of 1,000 hosts whose CPU seconds, every process, are `cpu` (provisioner, helpers, fleet, nats-server, DynamoDB Local, benchmark). */
function run(side: "go" | "ours", helper: "bash" | "compiled", cpu: [number, number, number, number, number, number], hostsPerMin: number): RunResult {
  const [provisioner, helpers_reaped, fleet, nats_server, dynamodb_local, benchmark_process] = cpu;
  return {
    side,
    fleet: "simulator-1000",
    nodes: 1_000,
    setting: side === "go" ? "workers 256" : "10 x 10",
    config: "default",
    helper,
    pair: `${helper}/default/1.1`,
    complete: true,
    timeout_s: 220,
    restarted: 1_000,
    provisioned: 1_000,
    refused_requests: 0,
    seconds_first_admission_to_last_restart: 60_000 / hostsPerMin,
    hosts_per_min: hostsPerMin,
    admission_to_restart_ms: { p99: 3_000, samples: 1_000 },
    discovery_to_restart_ms: { p99: 7_000, samples: 1_000 },
    admission_timeline: [1_000],
    longest_admission_gap_s: 0.5,
    start_load: 1.2,
    steal_pct: 0,
    cpu_s: { provisioner, helpers_reaped, fleet, nats_server, dynamodb_local, benchmark_process },
    cpu_ms_per_host: provisioner,
    helper_cpu_ms_per_host: helpers_reaped,
    peak_memory_mb: 250,
    load_average_1m: { start: 1.2, max: 1.9, after: 1.9, samples: [1.2, 1.9] },
  };
}

function report(bashRatio: number, compiledRatio: number): Report {
  const fleet = { ...summariseFleet("simulator-1000", []), median_ratio_hosts_per_min: bashRatio, median_ratio_hosts_per_min_compiled: compiledRatio };
  return {
    generated: "2026-12-05T00:00:00.000Z",
    wall_seconds: 600,
    cpus: 2,
    cpu_model: "test CPU",
    node: "v22",
    go_provisioner: { binary: "/bin/go-provisioner" },
    settings: { pairs: 3, go_workers: 256, ours_default: "10 x 10", ours_tuned: null, max_start_load: 1.5, max_steal_pct: 3, load_wait_s: 120, warm_up_nodes: 200, store_delay_ms: 0 },
    real_fleet: { run: false, reason: "not asked for" },
    fleets: [fleet],
    runs: [
      // Go 35 ms a host with bash + jq, 20 compiled; ours 30.7 and 12.5.
      run("go", "bash", [12, 18, 1.5, 3, 0, 0.5], 3_400),
      run("ours", "bash", [6, 18.5, 1.2, 0.6, 3.8, 0.6], 4_150),
      run("go", "compiled", [13, 2, 1.5, 3, 0, 0.5], 6_000),
      run("ours", "compiled", [5, 2, 1, 0.5, 3.5, 0.5], 9_000),
    ],
  };
}

describe("bench:peer report, findings", () => {
  it("judges the bash + jq median against 1.3x and the compiled one against 2x", () => {
    // Act
    const text = markdown(report(1.22, 1.5));

    // Assert
    expect(text).toContain("median 1.22x the hosts/min with the bash + jq helper (goal of 1.3x not met)");
    expect(text).toContain("median 1.5x the hosts/min with the compiled helper (goal of 2x not met)");
    expect(text).toContain("| fleet | median ratio, bash + jq (min-max, goal >= 1.3) | median ratio, compiled (goal >= 2) |");
  });

  it("says what CPU per host ours would need for each goal not met, and how busy the cores were", () => {
    // Act
    const text = markdown(report(1.22, 1.5));

    // Assert: 35 / 1.3 = 26.9 (30.7 - 26.9 = 3.8 less); 20 / 2 = 10 (2.5 less). Cores: 35 ms x 3,400/60 s = 2.0; 12.5 x 9,000/60 = 1.9.
    expect(text).toContain("simulator-1000, bash + jq helper: Go 35 ms per host (2 cores busy), ours 30.7 (2.1 cores); 1.3x needs ours at 26.9 or less, 3.8 ms less per host");
    expect(text).toContain("simulator-1000, compiled helper: Go 20 ms per host (2 cores busy), ours 12.5 (1.9 cores); 2x needs ours at 10 or less, 2.5 ms less per host");
  });

  it("says how much of that need the work both sides share leaves to the provisioner and the stand-ins, and what ours costs without DynamoDB Local", () => {
    // Act
    const text = markdown(report(1.22, 1.5));

    // Assert: bash + jq, ours' helper, fleet and nats-server 18.5 + 1.2 + 0.6 = 20.3, so 26.9 - 20.3 = 6.6 is left
    // for 6 + 3.8 + 0.6 = 10.4; without DynamoDB Local 30.7 - 3.8 = 26.9, and 35 / 26.9 = 1.3.
    expect(text).toContain(
      "Ours' helper, fleet and nats-server take 20.3 of it, which leaves 6.6 for the provisioner and the stand-ins for AWS, against 10.4 today (provisioner 6, DynamoDB Local 3.8, fauxqs and the benchmark 0.6); without DynamoDB Local on the box (as on AWS) ours would cost 26.9, Go's CPU per host over 1.3",
    );
    // Compiled: 2 + 1 + 0.5 = 3.5 shared, 10 - 3.5 = 6.5 left for 5 + 3.5 + 0.5 = 9; 12.5 - 3.5 = 9, and 20 / 9 = 2.22.
    expect(text).toContain("take 3.5 of it, which leaves 6.5 for the provisioner and the stand-ins for AWS, against 9 today");
    expect(text).toContain("ours would cost 9, Go's CPU per host over 2.22");
  });

  it("says where the processes ran: on every CPU, or both sides on CPU 0 and the stand-ins on CPU 1", () => {
    // Arrange
    const shared = report(1.22, 1.5);
    const apart: Report = { ...shared, settings: { ...shared.settings, stand_ins_apart: true } };

    // Act
    const [sharedText, apartText] = [markdown(shared), markdown(apart)];

    // Assert
    expect(sharedText).toContain("- **CPUs**: every process on any of the 2 CPUs, the stand-ins for AWS's services (DynamoDB Local, fauxqs) included.");
    expect(apartText).toContain("on 2 CPU(s) (test CPU), both sides on CPU 0 and the stand-ins for AWS's services on CPU 1, Node v22;");
    expect(apartText).toContain("- **CPUs**: both sides' processes (provisioner, helpers, fleet, nats-server) on CPU 0; DynamoDB Local, fauxqs and the benchmark on CPU 1");
    // What a goal would take is read from cores both sides share alike, which they do not here.
    expect(sharedText).toContain("What the goals not met would take");
    expect(apartText).not.toContain("What the goals not met would take");
  });

  it("says nothing of what a goal would take once both are met", () => {
    // Act
    const text = markdown(report(1.35, 2.1));

    // Assert
    expect(text).toContain("(goal met)");
    expect(text).not.toContain("What the goals not met would take");
  });
});
