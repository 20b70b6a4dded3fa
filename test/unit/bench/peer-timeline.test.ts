import { describe, expect, it } from "vitest";
import { admissionTimeline, discoveryToRestart, longestAdmissionGapS, parseCpuTicks, stealPercent } from "../../../bench/peer-timeline";

describe("bench:peer admission timeline", () => {
  it("counts first admissions per second from the origin", () => {
    expect(admissionTimeline([1_000, 1_400, 2_100, 4_999], 1_000)).toEqual([2, 1, 0, 1]);
  });

  it("takes the longest gap from the first discovery through consecutive admissions", () => {
    // Discovery at 0, admissions at 0.5 s, 1 s, then nothing for 6 s while hosts waited, then the last.
    expect(longestAdmissionGapS([500, 1_000, 7_000], 3, 0, 20_000)).toBe(6);
  });

  it("counts the wait from the last admission to the run's end when discovered hosts were never admitted", () => {
    expect(longestAdmissionGapS([500, 1_000], 3, 0, 60_000)).toBe(59);
  });

  it("ends the gaps at the last host's admission once every host is admitted", () => {
    expect(longestAdmissionGapS([2_000, 2_500, 3_000], 3, 0, 600_000)).toBe(2);
  });
});

describe("bench:peer latency from discovery", () => {
  it("measures each host from the first discovery broadcast that found it, one admitted again too, and a startup-event admission from the fleet's start", () => {
    // Arrange
    const restartedAt = new Map([
      ["a", 10_000],
      ["b", 70_000],
      ["c", 9_000],
    ]);
    const admissions = new Map([
      ["a", [{ at: 1_000 }]],
      // Admitted again after the second discovery: still measured from the first, which found it.
      ["b", [{ at: 1_000 }, { at: 61_000, source: "discovery" }]],
      ["c", [{ at: 3_000, source: "lifecycle" }]],
    ]);

    // Act
    const latencies = discoveryToRestart(restartedAt, admissions, [60_000, 500], 200);

    // Assert
    expect(latencies).toEqual([9_500, 69_500, 8_800]);
  });
});

describe("bench:peer CPU steal", () => {
  const procStat = (user: number, steal: number) => `cpu  ${user} 0 100 800 0 0 0 ${steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\n`;

  it("is the steal ticks over all ticks between two /proc/stat readings, in %", () => {
    // Arrange
    const before = parseCpuTicks(procStat(100, 0));
    const after = parseCpuTicks(procStat(190, 10));

    // Act, Assert
    expect(before).toEqual({ steal: 0, total: 1_000 });
    expect(stealPercent(before, after)).toBe(10);
  });
});
