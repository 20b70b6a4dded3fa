// Decision logic shared by the example helpers (provision-helper.mjs and lambda-helper.ts).
// Zero dependencies so `node provision-helper.mjs` runs anywhere Node does.
//
// Conventions (for tests and demos, not for production):
//   identity starting with "defer-"    -> {defer: true}; the provisioner retries the node later
//   identity starting with "shutdown-" -> {shutdown: true}; the provisioner shuts the node down
//   PROVISION_HELPER_DEFER=true        -> every node is deferred
//   PROVISION_HELPER_BROKERS           -> plugin.choria.middleware_hosts (default below)
//   PROVISION_HELPER_UPGRADE           -> returned as `upgrade` (target version)
//   PROVISION_HELPER_TRUSTED_SIGNERS   -> comma list of hex ed25519 keys that sign the site's client
//                                         JWTs (plugin.security.choria.trusted_signers); requests are
//                                         then authorized by the agent list in the caller's JWT
//   PROVISION_HELPER_CA                -> path, on the node, of the CA bundle that signed the brokers'
//                                         certificates (plugin.security.choria.ca)
// A node that sent an ed25519 public key gets the `choria` security provider with its token and
// seed files in the directory it reported; other nodes get a plain mcollective configuration.
// A real go-choria server with the `choria` provider refuses to start without trusted signers, and
// without a CA it connects to any broker without checking its certificate: set both for real nodes.

export const DEFAULT_BROKERS = "nats://broker.example.net:4222";

/**
 * @param {import("./decide.d.mts").HelperInput} request
 * @param {Record<string, string | undefined>} env
 * @returns {import("./decide.d.mts").HelperOutput}
 */
export function decide(request, env) {
  const identity = typeof request?.identity === "string" ? request.identity : "";
  const reply = { defer: false, shutdown: false, msg: "", configuration: {}, certificate: "", ca: "", key: "", ssldir: "" };

  if (identity === "") {
    return { ...reply, defer: true, msg: "no identity received in request" };
  }
  if (identity.startsWith("defer-") || env.PROVISION_HELPER_DEFER === "true") {
    return { ...reply, defer: true, msg: `provisioning of ${identity} deferred by the example helper` };
  }
  if (identity.startsWith("shutdown-")) {
    return { ...reply, shutdown: true, msg: `${identity} is not allowed on this network` };
  }

  const configuration = {
    identity,
    loglevel: "info",
    collectives: "mcollective",
    "plugin.choria.server.provision": "false",
    "plugin.choria.middleware_hosts": env.PROVISION_HELPER_BROKERS || DEFAULT_BROKERS,
  };
  const ed25519 = request.ed25519_pubkey;
  if (ed25519 && typeof ed25519.directory === "string" && ed25519.directory !== "") {
    configuration["plugin.security.provider"] = "choria";
    configuration["plugin.security.choria.token_file"] = `${ed25519.directory}/server.jwt`;
    configuration["plugin.security.choria.seed_file"] = `${ed25519.directory}/server.seed`;
    if (env.PROVISION_HELPER_TRUSTED_SIGNERS) {
      configuration["plugin.security.choria.trusted_signers"] = env.PROVISION_HELPER_TRUSTED_SIGNERS;
      // The site's policy travels in its client JWTs (`choria jwt client --agents rpcutil.*`).
      configuration.rpcauthprovider = "aaasvc";
    }
    if (env.PROVISION_HELPER_CA) configuration["plugin.security.choria.ca"] = env.PROVISION_HELPER_CA;
  }

  const result = { ...reply, msg: `configured ${identity}`, configuration };
  if (request.csr && typeof request.csr.ssldir === "string") result.ssldir = request.csr.ssldir;
  if (env.PROVISION_HELPER_UPGRADE) result.upgrade = env.PROVISION_HELPER_UPGRADE;
  return result;
}
