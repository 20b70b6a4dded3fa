/**
 * `npm run bench:calendar` (docs/renewal.md, "Checked at load") runs as documented and prints its
 * figures: the load with the maintenance-window check and without it, each a median of fresh processes.
 */
import { describe, expect, it } from "vitest";
import { failureOf, npmScript } from "../../support/npm-script";

describe("bench:calendar", () => {
  it("prints the first and later loads with renewal's window check and without it, and the machine's load", async () => {
    // Act
    const { stdout } = await npmScript("bench:calendar", ["--runs", "1"], { timeoutMs: 120_000 });

    // Assert
    const figure = String.raw`first load \d+(\.\d+)? ms, later loads \d+(\.\d+)? ms, renew's first allowedAt/nextAllowed \d+(\.\d+)? ms \(medians\)`;
    expect(stdout).toMatch(new RegExp(String.raw`^renewal on \(checked\), 1 processes: ${figure}$`, "m"));
    expect(stdout).toMatch(new RegExp(String.raw`^renewal off \(no check\), 1 processes: ${figure}$`, "m"));
    expect(stdout).toMatch(/^load average \d+(\.\d+)?$/m);
  });

  it("refuses a run count that is not a whole number of at least 1, saying so", async () => {
    // Act
    const failure = await failureOf("bench:calendar", ["--runs", "0"], { timeoutMs: 60_000 });

    // Assert
    expect(failure?.code).not.toBe(0);
    expect(failure?.stderr).toMatch(/--runs must be a whole number of at least 1/);
  });
});
