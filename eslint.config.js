import js from "@eslint/js";
import tseslint from "typescript-eslint";
import layers from "./eslint-rules/layers.js";

/**
 * The layers (docs/architecture.md), enforced on imports. Between this repo's own folders, by
 * eslint-rules/layers.js: `layers/direction` (domain -> no lib/app, lib/aws, lib/dynamodb, lib/nats;
 * lib/app -> no lib/aws, lib/dynamodb, lib/nats; lib/nats -> no lib/aws, lib/dynamodb; lib/dynamodb
 * -> no lib/aws, lib/nats (it implements ports of lib/app and the domain); nothing in lib/ -> cli/)
 * and `layers/no-cycle` (type-only imports included). On packages, by no-restricted-imports:
 * - handlers/ import only their function's composition in lib/aws;
 * - lib/aws is the one place for AWS SDK clients, Powertools and middy, except DynamoDB;
 * - lib/dynamodb is the one place for `@aws-sdk/client-dynamodb` and `@aws-sdk/util-dynamodb`
 *   (lib/aws included: it creates the clients and stores through lib/dynamodb);
 * - lib/nats is the one place for the `nats` client;
 * - lib/app (the use cases) and the domain import none of them;
 * - nothing in lib/ imports dev tooling, handlers or examples.
 * `no-restricted-imports` takes one option per file, so each block lists every group its files are denied.
 *
 * Size: `max-lines-per-function` keeps every function of lib/, dev/, bench/, scripts/ and cli/ (not
 * test/) at 80 lines or fewer, blank lines and comments not counted, so each one reads at once.
 */
const DEV_TOOLING = {
  group: ["**/dev/**", "**/handlers/**", "**/examples/**"],
  message: "lib/ is the layer below the handlers and the dev tooling: it never imports dev/, handlers/ or examples/.",
};
const DYNAMODB = {
  group: ["@aws-sdk/client-dynamodb", "@aws-sdk/util-dynamodb"],
  message: "DynamoDB code belongs in lib/dynamodb (the stores, the expression builder, the client): lib/aws composes it from there, use cases and domain code take ports.",
};
const AWS = {
  // DynamoDB's two packages are the DYNAMODB group's alone, so an import of them is reported once, naming lib/dynamodb.
  group: ["@aws-sdk/*", "!@aws-sdk/client-dynamodb", "!@aws-sdk/util-dynamodb", "@aws-lambda-powertools/*", "@middy/*", "aws-lambda"],
  message: "AWS clients, Powertools and middy belong in lib/aws (DynamoDB code in lib/dynamodb); use cases and domain code take ports.",
};
const NATS = {
  // The package itself, not this repo's lib/nats folder (a group pattern would match both).
  regex: "^nats(/.*)?$",
  message: "The NATS client belongs in lib/nats (adapters); use cases and domain code take the Broker and LifecycleEventSource ports.",
};

export default tseslint.config(
  { ignores: ["node_modules/", ".serverless/", ".esbuild/", "reports/", "coverage/", "dist/", "bench/.build/"] },
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
    files: ["lib/**/*.ts", "dev/**/*.ts", "bench/**/*.ts", "scripts/**/*.ts", "cli/**/*.ts"],
    rules: { "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    files: ["lib/**/*.ts"],
    ignores: ["lib/aws/**", "lib/dynamodb/**", "lib/nats/**"],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING, DYNAMODB, AWS, NATS] }] },
  },
  {
    files: ["lib/nats/**/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING, DYNAMODB, AWS] }] },
  },
  {
    files: ["lib/aws/**/*.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [DEV_TOOLING, DYNAMODB, NATS] }] },
  },
  {
    files: ["lib/dynamodb/**/*.ts"],
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
