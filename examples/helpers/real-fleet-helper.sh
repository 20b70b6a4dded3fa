#!/usr/bin/env bash
# The real-fleet provisioning helper (bash + jq + openssl). It sends every node to the target
# broker with a configuration a real go-choria server can run with, and that the site's admin
# client can use:
#   - a CSR (feature pki) is signed by the test CA; the node gets the file security provider
#     with its certificate, key and the CA in the ssldir it reported (it verifies the broker and
#     joins it with mTLS). Its action policies are files next to its configuration
#     (policies/<agent>.policy), which provisioning cannot write: the site ships them with the
#     package or config management (the real-fleet harness puts them there before a node starts);
#   - an ed25519 public key (feature ed25519) gets the choria security provider with the
#     server.jwt / server.seed the provisioner writes, trusting the site signer (which signs
#     server and client JWTs), verifying the broker against the CA, and authorizing each request
#     by the agent list in the caller's JWT (rpcauthprovider aaasvc).
# Environment:
#   REALFLEET_TARGET_BROKER   host:port of the target broker (plugin.choria.middleware_hosts)
#   REALFLEET_TRUSTED_SIGNERS hex ed25519 public key(s) of the site signer
#   REALFLEET_CA_CERT / REALFLEET_CA_KEY  the CA that signs CSRs and the brokers' certificates
#                             (REALFLEET_CA_CERT is also a path every node can read)
#   REALFLEET_SERVER_CLAIMS   optional JSON returned as server_claims (org, collectives, exp)
#   REALFLEET_CERT_VALIDITY_SECONDS  optional: the signed certificate is valid this many seconds
#                             (renewal tests) instead of 2 days; `openssl x509 -req` counts only
#                             whole days, so this signs with `openssl ca` and an explicit end date
set -euo pipefail

request="$(cat)"
certificate=""
csr="$(jq -r '.csr.csr // ""' <<<"$request")"
if [[ -n "$csr" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  printf '%s' "$csr" >"$work/node.csr"
  if [[ -n "${REALFLEET_CERT_VALIDITY_SECONDS:-}" ]]; then
    : >"$work/index.txt"
    openssl rand -hex 16 >"$work/serial"
    printf '%s\n' "[ca]" "default_ca = helper" "[helper]" "database = $work/index.txt" "new_certs_dir = $work" \
      "serial = $work/serial" "default_md = sha256" "policy = any" "unique_subject = no" "[any]" "commonName = supplied" >"$work/ca.cnf"
    end="$(date -u -d "@$(($(date +%s) + REALFLEET_CERT_VALIDITY_SECONDS))" +%Y%m%d%H%M%SZ)"
    openssl ca -batch -config "$work/ca.cnf" -cert "$REALFLEET_CA_CERT" -keyfile "$REALFLEET_CA_KEY" \
      -in "$work/node.csr" -out "$work/node.pem" -enddate "$end" -notext 2>/dev/null
  else
    openssl x509 -req -in "$work/node.csr" -CA "$REALFLEET_CA_CERT" -CAkey "$REALFLEET_CA_KEY" \
      -CAcreateserial -CAserial "$work/ca.srl" -days 2 -out "$work/node.pem" 2>/dev/null
  fi
  certificate="$(cat "$work/node.pem")"
fi

exec jq -c \
  --arg broker "$REALFLEET_TARGET_BROKER" \
  --arg signers "${REALFLEET_TRUSTED_SIGNERS:-}" \
  --arg certificate "$certificate" \
  --arg ca_file "$REALFLEET_CA_CERT" \
  --argjson claims "${REALFLEET_SERVER_CLAIMS:-null}" \
  --rawfile ca "$REALFLEET_CA_CERT" '
  .identity as $id
  | (.csr.ssldir // "") as $ssldir
  | (.ed25519_pubkey.directory // "") as $secure
  | ({identity: $id, loglevel: "info", collectives: "mcollective",
     "plugin.choria.server.provision": "false",
     "plugin.choria.middleware_hosts": $broker}
    + (if $secure != "" then
         {"plugin.security.provider": "choria",
          "plugin.security.choria.token_file": "\($secure)/server.jwt",
          "plugin.security.choria.seed_file": "\($secure)/server.seed",
          "plugin.security.choria.trusted_signers": $signers,
          "plugin.security.choria.ca": $ca_file,
          rpcauthprovider: "aaasvc"}
       elif $ssldir != "" then
         {"plugin.security.provider": "file",
          "plugin.security.file.certificate": "\($ssldir)/certificate.pem",
          "plugin.security.file.key": "\($ssldir)/private.pem",
          "plugin.security.file.ca": "\($ssldir)/ca.pem"}
       else {} end)) as $configuration
  | {defer: false, shutdown: false, msg: "configured \($id)", configuration: $configuration,
     certificate: $certificate, ca: (if $certificate != "" then $ca else "" end), key: "", ssldir: $ssldir}
  + (if $claims != null then {server_claims: $claims} else {} end)
' <<<"$request"
