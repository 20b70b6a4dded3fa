import { defineConfig } from "vitest/config";

// The project's own suite, in five projects that can be run apart (`npm run test:<name>`):
// - unit: pure logic over the in-memory fakes of test/support; needs no service, so it runs on a
//   machine with no Java and no nats-server (it has no global setup on purpose).
// - integration: real nats-server, DynamoDB Local (one JVM for the run, the global setup) and fauxqs.
// - deploy: `sls package` and the generated CloudFormation template (slow, needs no service).
// - e2e: the local stack and the scripts as a user runs them.
// - simulation: the use cases at fleet scale (100,000 simulated hosts) on the in-memory fakes and a
//   virtual clock; no service, minutes of CPU.
// The conformance suite that reads ../shared lives in vitest.conformance.config.ts, the real fleet in
// vitest.realfleet.config.ts.
const WITH_DYNAMODB = ["test/support/global-setup.ts"];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    projects: [
      // isolate: false: a unit file's modules are imported once per worker, not once per file (the
      // imports were half of the unit run's time); a file must leave the process as it found it.
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts"], isolate: false } },
      { extends: true, test: { name: "integration", include: ["test/integration/**/*.test.ts"], globalSetup: WITH_DYNAMODB } },
      { extends: true, test: { name: "deploy", include: ["test/deploy/**/*.test.ts"] } },
      { extends: true, test: { name: "e2e", include: ["test/e2e/**/*.test.ts"], globalSetup: WITH_DYNAMODB } },
      { extends: true, test: { name: "simulation", include: ["test/simulation/**/*.test.ts"], testTimeout: 600_000 } },
    ],
  },
});
