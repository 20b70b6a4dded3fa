/**
 * `npm run bench:cli` (docs/operations.md, "Installing the CLI") runs as documented: it packs and
 * installs the operator CLI as test/e2e/packed-cli.test.ts does, starts `npm run local:services`,
 * times `status` by each way of starting the CLI, and prints a line of figures for each way and
 * the machine's load. One timed run: what is checked is that each figure is there, not its size.
 */
import { describe, expect, it } from "vitest";
import { npmScript } from "../support/npm-script";

const WAYS = ["installed bin: choria-provisioner (documented)", "npx choria-provisioner, in the install directory", "npx choria-provisioner, in the checkout"];
const SECONDS = String.raw`\d+\.\d\d s`;

describe("bench:cli", () => {
  it("prints the median, min, max and cold start of each way of running the installed CLI, and the load", async () => {
    // Act: execFile rejects on any exit code but 0.
    const { stdout } = await npmScript("bench:cli", ["--runs", "1"], { timeoutMs: 240_000 });

    // Assert
    expect(stdout).toMatch(/^choria-provisioner status against npm run local:services, 1 runs each \(node v\d+\.\d+\.\d+, \d+ cores\)$/m);
    for (const way of WAYS) {
      expect(stdout).toMatch(new RegExp(`^${way.replace(/[()]/g, "\\$&")} +median ${SECONDS}  min ${SECONDS}  max ${SECONDS}  cold ${SECONDS}$`, "m"));
    }
    expect(stdout).toMatch(/^1-minute load: \d+\.\d\d before, \d+\.\d\d after$/m);
  }, 250_000);
});
