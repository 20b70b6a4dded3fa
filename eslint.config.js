import js from "@eslint/js";
import tseslint from "typescript-eslint";
import layers from "./eslint-rules/layers.js";

/**
 * The layers (docs/architecture.md), enforced on imports. Between this repo's own folders, by
 * eslint-rules/layers.js: `layers/direction` (domain -> no lib/app, lib/aws, lib/nats; lib/app -> no
 * lib/aws, lib/nats; lib/nats -> no lib/aws; nothing in lib/ -> cli/) and
 * `layers/no-cycle` (type-only imports included). On packages, by no-restricted-imports:
 * - handlers/ import only their function's composition in lib/aws;
 * - lib/aws is the one place for AWS SDK clients, Powertools and middy (the DynamoDB store
 *   adapters of lib/lease and lib/admission excepted);
 * - lib/nats is the one place for the `nats` client;
 * - lib/app (the use cases) and the domain import neither;
 * - nothing in lib/ imports dev tooling, handlers or examples.
 * `no-restricted-imports` takes one option per file, so each block lists every group its files are denied.
 */
const DEV_TOOLING = {
  group: ["**/dev/**", "**/handlers/**", "**/examples/**"],
  message: "lib/ is the layer below the handlers and the dev tooling: it never imports dev/, handlers/ or examples/.",
};
const AWS = {
  group: ["@aws-sdk/*", "@aws-lambda-powertools/*", "@middy/*", "aws-lambda"],
  message: "AWS clients, Powertools and middy belong in lib/aws (or a DynamoDB store adapter); use cases and domain code take ports.",
};
const NATS = {
  // The package itself, not this repo's lib/nats folder (a group pattern would match both).
  regex: "^nats(/.*)?$",
  message: "The NATS client belongs in lib/nats (adapters); use cases and domain code take the Broker and LifecycleEventSource ports.",
};
const DYNAMODB_ADAPTERS = ["lib/lease/dynamodb-*.ts", "lib/admission/dynamodb-*.ts"];

export default tseslint.config(
  { ignores: ["node_modules/", ".serverless/", ".esbuild/", "reports/", "coverage/", "dist/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-console": "off",
    },
  },
  {
    files: ["**/*.ts", "**/*.mts"],
    plugins: { layers },
    rules: {
      "layers/direction": "error",
      "layers/no-cycle": "error",
      // test/unit/aws/function-bundles.test.ts checks the bundles for the effect.
      "no-restricted-syntax": [
        "error",
        {
          selector: "ImportDeclaration[source.value='zod'][importKind!='type'] > ImportSpecifier[imported.name='z'][importKind!='type']",
          message: 'Write `import * as z from "zod"`: the named `z` export is the whole namespace object, so the bundle keeps every zod locale (about 260 KiB).',
        },
      ],
    },
  },
  {
    files: ["lib/**/*.ts"],
    ignores: ["lib/aws/**", "lib/nats/**", ...DYNAMODB_ADAPTERS],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING, AWS, NATS] }] },
  },
  {
    files: ["lib/nats/**/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING, AWS] }] },
  },
  {
    files: ["lib/aws/**/*.ts", ...DYNAMODB_ADAPTERS],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING, NATS] }] },
  },
  {
    files: ["cli/**/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING] }] },
  },
  {
    files: ["handlers/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/lib/**", "!**/lib/aws", "!**/lib/aws/**"],
              message: "A handler imports only its function's composition from lib/aws.",
            },
          ],
        },
      ],
    },
  },
);
