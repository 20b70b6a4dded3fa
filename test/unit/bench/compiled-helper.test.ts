import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { buildCompiledHelper } from "../../../bench/compiled-helper";
import { HELPERS } from "../../../dev/local/stack";

const decide = (command: string, request: unknown, env: Record<string, string> = {}) => {
  const result = spawnSync(command, [], { input: JSON.stringify(request), encoding: "utf8", env: { PATH: process.env.PATH ?? "", ...env } });
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as unknown;
};

describe("the benchmark's compiled helper", () => {
  const compiled = buildCompiledHelper();
  const cases: Array<[string, unknown, Record<string, string>]> = [
    ["a node with an ed25519 key and a CSR", { identity: "n1.example.net", ed25519_pubkey: { directory: "/etc/choria" }, csr: { ssldir: "/etc/ssl/choria" } }, {}],
    ["a plain node with brokers and an upgrade set", { identity: "n2.example.net" }, { PROVISION_HELPER_BROKERS: "nats://b.example.net:4222", PROVISION_HELPER_UPGRADE: "0.31.0" }],
    ["a deferred node", { identity: "defer-n3.example.net" }, {}],
    ["every node deferred", { identity: "n4.example.net" }, { PROVISION_HELPER_DEFER: "true" }],
    ["a node to shut down", { identity: "shutdown-n5.example.net" }, {}],
    ["no identity", {}, {}],
  ];

  it.each(cases)("makes the bash + jq helper's decision: %s", (_, request, env) => {
    expect(decide(compiled, request, env)).toEqual(decide(HELPERS.bash, request, env));
  });
});
