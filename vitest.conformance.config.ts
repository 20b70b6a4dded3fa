import { defineConfig } from "vitest/config";

// Conformance against the upstream Choria fixtures in ../shared/fixtures/choria (always present in CI).
export default defineConfig({
  test: {
    include: ["test/conformance/**/*.test.ts"],
    testTimeout: 60_000,
    pool: "forks",
  },
});
