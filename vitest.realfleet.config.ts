import { defineConfig } from "vitest/config";

// The real-fleet suite: real go-choria servers (scripts/peers/build-choria.sh) provisioned by the
// local stack. Needs root (each node runs in its own UTS and mount namespace). Two files run at
// once: the renewal files spend most of their minutes waiting out credential lifetimes and a
// takeover, not on CPU, and every file's waits follow the protocol's bounds, so they hold with
// another fleet beside them; more than two would crowd this 2-core machine while fleets provision.
export default defineConfig({
  test: {
    include: ["test/realfleet/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: "forks",
    maxWorkers: 2,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  },
});
