import { defineConfig } from "vitest/config";

// The project's own suite: unit, integration (real nats-server, DynamoDB Local, fauxqs) and e2e.
// It needs nothing outside this repository; the conformance suite that reads ../shared lives in
// vitest.conformance.config.ts.
export default defineConfig({
  test: {
    include: ["test/unit/**/*.test.ts", "test/integration/**/*.test.ts", "test/e2e/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
