/**
 * The example helpers' settings for a real site: an ed25519 node gets the site's trusted signers
 * (without which a real server with the `choria` provider refuses to start), authorization by the
 * caller JWT's agent list, and the CA it verifies its broker with. The node and bash helpers give the
 * same configuration; without the settings the configuration is as before.
 */
import { execFile } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const EXAMPLES = resolve(dirname(fileURLToPath(import.meta.url)), "../../../examples/helpers");
const HELPERS: Array<[string, string, string[]]> = [
  ["node", process.execPath, [join(EXAMPLES, "provision-helper.mjs")]],
  ["bash + jq", "bash", [join(EXAMPLES, "provision-helper.sh")]],
];
const SIGNERS = "a".repeat(64) + "," + "b".repeat(64);
const CA = "/etc/choria/site-ca.pem";

function ask(command: string, args: string[], request: object, env: Record<string, string>): Promise<Record<string, unknown>> {
  return new Promise((resolveReply, reject) => {
    const child = execFile(command, args, { env: { PATH: process.env.PATH ?? "", ...env }, timeout: 10_000 }, (error, stdout) => {
      if (error) reject(error);
      else resolveReply(JSON.parse(stdout) as Record<string, unknown>);
    });
    child.stdin?.end(JSON.stringify(request));
  });
}

const ed25519Node = {
  identity: "n1.site.example.net",
  csr: null,
  ed25519_pubkey: { public_key: "cc".repeat(32), directory: "/etc/choria", signature: "dd" },
  inventory: "{}",
  jwt: null,
};

describe.each(HELPERS)("the %s example helper for a real site", (_name, command, args) => {
  it("gives an ed25519 node the trusted signers, JWT agent-list authorization and the broker CA", async () => {
    const reply = await ask(command, args, ed25519Node, { PROVISION_HELPER_TRUSTED_SIGNERS: SIGNERS, PROVISION_HELPER_CA: CA });

    expect(reply.configuration).toEqual({
      identity: "n1.site.example.net",
      loglevel: "info",
      collectives: "mcollective",
      "plugin.choria.server.provision": "false",
      "plugin.choria.middleware_hosts": "nats://broker.example.net:4222",
      "plugin.security.provider": "choria",
      "plugin.security.choria.token_file": "/etc/choria/server.jwt",
      "plugin.security.choria.seed_file": "/etc/choria/server.seed",
      "plugin.security.choria.trusted_signers": SIGNERS,
      rpcauthprovider: "aaasvc",
      "plugin.security.choria.ca": CA,
    });
  });

  it("adds none of them without the settings, nor to a node without an ed25519 key", async () => {
    const plain = await ask(command, args, ed25519Node, {});
    const x509 = await ask(command, args, { ...ed25519Node, ed25519_pubkey: null }, { PROVISION_HELPER_TRUSTED_SIGNERS: SIGNERS, PROVISION_HELPER_CA: CA });

    for (const reply of [plain, x509]) {
      const configuration = reply.configuration as Record<string, string>;
      expect(Object.keys(configuration).filter((key) => key.endsWith("trusted_signers") || key.endsWith(".ca") || key === "rpcauthprovider")).toEqual([]);
    }
  });
});

