import { defineConfig } from "vitest/config";

// The real-fleet suite: real go-choria servers (scripts/peers/build-choria.sh) provisioned by the
// local stack. Needs root (each node runs in its own UTS and mount namespace). The files run one
// after another: each provisions a whole fleet on this shared machine.
export default defineConfig({
  test: {
    include: ["test/realfleet/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: "forks",
    fileParallelism: false,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
