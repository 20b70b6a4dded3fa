#!/usr/bin/env bash
# Example provisioning helper in bash + jq, with the same rules as decide.mjs:
#   identity "defer-*"              -> defer
#   identity "shutdown-*"           -> shutdown
#   PROVISION_HELPER_DEFER=true     -> defer every node
#   PROVISION_HELPER_BROKERS        -> plugin.choria.middleware_hosts
#   PROVISION_HELPER_UPGRADE        -> upgrade target version
#   PROVISION_HELPER_TRUSTED_SIGNERS -> trusted_signers (and rpcauthprovider aaasvc) for ed25519 nodes
#   PROVISION_HELPER_CA             -> plugin.security.choria.ca (path on the node) for ed25519 nodes
# A node with an ed25519 public key gets the choria security provider; a real server refuses it
# without trusted signers and skips verifying the broker without a CA, so set both for real nodes.
set -euo pipefail

exec jq -c \
  --arg brokers "${PROVISION_HELPER_BROKERS:-nats://broker.example.net:4222}" \
  --arg defer_all "${PROVISION_HELPER_DEFER:-}" \
  --arg upgrade "${PROVISION_HELPER_UPGRADE:-}" \
  --arg signers "${PROVISION_HELPER_TRUSTED_SIGNERS:-}" \
  --arg ca "${PROVISION_HELPER_CA:-}" '
  (.identity // "") as $id
  | {defer: false, shutdown: false, msg: "", configuration: {}, certificate: "", ca: "", key: "", ssldir: ""} as $reply
  | if $id == "" then $reply + {defer: true, msg: "no identity received in request"}
    elif ($id | startswith("defer-")) or $defer_all == "true" then
      $reply + {defer: true, msg: "provisioning of \($id) deferred by the example helper"}
    elif ($id | startswith("shutdown-")) then
      $reply + {shutdown: true, msg: "\($id) is not allowed on this network"}
    else
      ({identity: $id, loglevel: "info", collectives: "mcollective",
        "plugin.choria.server.provision": "false",
        "plugin.choria.middleware_hosts": $brokers}
       + (if (.ed25519_pubkey.directory // "") != "" then
            {"plugin.security.provider": "choria",
             "plugin.security.choria.token_file": "\(.ed25519_pubkey.directory)/server.jwt",
             "plugin.security.choria.seed_file": "\(.ed25519_pubkey.directory)/server.seed"}
            + (if $signers != "" then {"plugin.security.choria.trusted_signers": $signers, rpcauthprovider: "aaasvc"} else {} end)
            + (if $ca != "" then {"plugin.security.choria.ca": $ca} else {} end)
          else {} end)) as $configuration
      | $reply + {msg: "configured \($id)", configuration: $configuration}
      + (if (.csr.ssldir // null) != null then {ssldir: .csr.ssldir} else {} end)
      + (if $upgrade != "" then {upgrade: $upgrade} else {} end)
    end
'
