import js from "@eslint/js";
import tseslint from "typescript-eslint";

/**
 * The layers (README "Code layout"), enforced on imports. Each entry forbids a group of modules
 * for a set of files; `no-restricted-imports` takes one option per block, so every block below
 * lists all the groups its files are denied.
 */
const DEV_TOOLING = {
  group: ["**/dev/**", "**/handlers/**", "**/examples/**"],
  message: "lib/ is the layer below the handlers and the dev tooling: it never imports dev/, handlers/ or examples/.",
};

export default tseslint.config(
  { ignores: ["node_modules/", ".serverless/", ".esbuild/", "reports/", "coverage/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-console": "off",
    },
  },
  {
    files: ["lib/**/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING] }] },
  },
);
