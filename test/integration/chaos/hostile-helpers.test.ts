/**
 * Hostile or broken helpers, run as real child processes by the engine against simulated nodes:
 * hanging, crashing, killed, flooding stdout, printing garbage, leaving fields out or giving them
 * the wrong type, leaving a grandchild behind, echoing the provisioning token. Every one must end
 * as a HelperError at the helper (or configure) step, with nothing sent to the node after it and
 * no secret in the error.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { HelperError } from "../../../lib/errors";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import { recordScenario } from "../../support/chaos/scenario";
import { chainHas, ChaosHarness, chaosEngine, describeOutcome, natsRpc, requestsTo, TOKEN } from "../../support/chaos/support";
import { CappedWaitRpc } from "../../support/fakes";

let harness: ChaosHarness;

beforeAll(async () => {
  harness = await ChaosHarness.start();
});
afterEach(() => harness.stopFleets());
afterAll(() => harness?.stop());

const READ_STDIN = "for await (const _ of process.stdin);";

interface HelperCase {
  script: string;
  step: "helper" | "configure";
  message: RegExp;
  runner?: { timeoutMs?: number; maxOutputBytes?: number };
}

const CASES: Record<string, HelperCase> = {
  hangs: { script: `${READ_STDIN} setInterval(() => {}, 1000);`, step: "helper", message: /timed out after 300 ms/, runner: { timeoutMs: 300 } },
  "leaves-grandchild": {
    script: `import { spawn } from "node:child_process"; ${READ_STDIN} spawn("sleep", ["30"], { stdio: "inherit" }); process.stdout.write("{");`,
    step: "helper",
    message: /timed out after 300 ms/,
    runner: { timeoutMs: 300 },
  },
  crashes: { script: `${READ_STDIN} process.stdout.write("{}"); process.stderr.write("boom"); process.exit(3);`, step: "helper", message: /exited with code 3; stderr: boom/ },
  "killed-by-signal": { script: `${READ_STDIN} process.stdout.write("{}"); process.kill(process.pid, "SIGKILL");`, step: "helper", message: /was killed by SIGKILL/ },
  "silent-exit": { script: `${READ_STDIN} process.exit(0);`, step: "helper", message: /zero bytes received/ },
  "floods-stdout": { script: `${READ_STDIN} process.stdout.write("x".repeat(4 * 1024 * 1024));`, step: "helper", message: /output too large/, runner: { maxOutputBytes: 64 * 1024 } },
  "prints-garbage": { script: `${READ_STDIN} process.stdout.write("<html>502 Bad Gateway</html>");`, step: "helper", message: /not valid JSON/ },
  "invalid-utf8": { script: `${READ_STDIN} process.stdout.write(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));`, step: "helper", message: /not valid JSON/ },
  "wrong-types": { script: `${READ_STDIN} process.stdout.write(JSON.stringify({ defer: "no", configuration: { a: "b" } }));`, step: "helper", message: /field "defer"/ },
  "wrong-map-type": { script: `${READ_STDIN} process.stdout.write(JSON.stringify({ configuration: { loglevel: 5 } }));`, step: "helper", message: /field "configuration\.loglevel"/ },
  "json-array": { script: `${READ_STDIN} process.stdout.write("[1,2,3]");`, step: "helper", message: /field "\(root\)"/ },
  "missing-fields": { script: `${READ_STDIN} process.stdout.write("{}");`, step: "configure", message: /empty configuration/ },
  "echoes-token": {
    script: `let input = ""; for await (const chunk of process.stdin) input += chunk; process.stderr.write(input); process.exit(1);`,
    step: "helper",
    message: /zero bytes received; stderr: .*\[redacted\]/,
  },
};

describe("hostile helpers", () => {
  it("every broken helper ends the host as a HelperError, sends nothing after it and leaks no secret", async ({ task }) => {
    // Arrange
    const identities = Object.keys(CASES).map((name) => `${name}.example.net`);
    const healthy = "healthy.example.net";
    const fleet = await harness.fleet({ identities: [...identities, healthy] });
    const rpc = new CappedWaitRpc(natsRpc(harness.nc), 5_000);
    const engines = await Promise.all(
      Object.entries(CASES).map(async ([name, entry]) => {
        const command = await harness.helperScript(`${name}.mjs`, entry.script);
        return chaosEngine({ fleet, helper: new ExecHelperRunner({ command, ...entry.runner }), features: { jwt: true }, rpc });
      }),
    );
    const goodResponse = JSON.stringify({ configuration: { identity: healthy, "plugin.choria.server.provision": "false" } });
    const good = chaosEngine({
      fleet,
      helper: new ExecHelperRunner({ command: await harness.helperScript("good.mjs", `${READ_STDIN} process.stdout.write(${JSON.stringify(goodResponse)});`) }),
      features: { jwt: true },
      rpc,
    });

    // Act
    const [healthyOutcome, ...outcomes] = await Promise.all([
      good.engine.provision(good.work(healthy)),
      ...identities.map((identity, index) => engines[index]!.engine.provision(engines[index]!.work(identity))),
    ]);

    // Assert
    expect(describeOutcome(healthyOutcome!)).toBe("provisioned");
    Object.entries(CASES).forEach(([name, entry], index) => {
      const outcome = outcomes[index]!;
      const identity = `${name}.example.net`;
      expect(describeOutcome(outcome), identity).toBe(`failed@${entry.step}:named`);
      expect(outcome.kind === "failed" && chainHas(outcome.error, HelperError), identity).toBe(true);
      const message = outcome.kind === "failed" ? outcome.error.message : "";
      expect(message, identity).toMatch(entry.message);
      expect(message, identity).not.toContain(TOKEN);
      expect(requestsTo(fleet, identity), identity).toEqual(["jwt:0", "inventory:0"]);
    });
    recordScenario(task, { area: "hostile-helper", load: 1, faults: identities.length, badInputs: identities.length });
  });
});
