// A compiled provisioning helper for the side-by-side benchmark: the same decision as
// examples/helpers/provision-helper.sh (bash + jq), so that a helper costing about a millisecond
// instead of tens of them shows the provisioners' own difference. Standard library only, so the
// benchmark builds it with the machine's Go and no module download.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type request struct {
	Identity      *string `json:"identity"`
	Ed25519Pubkey *struct {
		Directory string `json:"directory"`
	} `json:"ed25519_pubkey"`
	CSR *struct {
		SSLDir *string `json:"ssldir"`
	} `json:"csr"`
}

type reply struct {
	Defer         bool              `json:"defer"`
	Shutdown      bool              `json:"shutdown"`
	Msg           string            `json:"msg"`
	Configuration map[string]string `json:"configuration"`
	Certificate   string            `json:"certificate"`
	CA            string            `json:"ca"`
	Key           string            `json:"key"`
	SSLDir        string            `json:"ssldir"`
	Upgrade       string            `json:"upgrade,omitempty"`
}

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func decide(req request) reply {
	out := reply{Configuration: map[string]string{}}
	id := ""
	if req.Identity != nil {
		id = *req.Identity
	}
	switch {
	case id == "":
		out.Defer = true
		out.Msg = "no identity received in request"
	case strings.HasPrefix(id, "defer-") || os.Getenv("PROVISION_HELPER_DEFER") == "true":
		out.Defer = true
		out.Msg = fmt.Sprintf("provisioning of %s deferred by the example helper", id)
	case strings.HasPrefix(id, "shutdown-"):
		out.Shutdown = true
		out.Msg = fmt.Sprintf("%s is not allowed on this network", id)
	default:
		out.Msg = "configured " + id
		out.Configuration = map[string]string{
			"identity":                       id,
			"loglevel":                       "info",
			"collectives":                    "mcollective",
			"plugin.choria.server.provision": "false",
			"plugin.choria.middleware_hosts": env("PROVISION_HELPER_BROKERS", "nats://broker.example.net:4222"),
		}
		if req.Ed25519Pubkey != nil && req.Ed25519Pubkey.Directory != "" {
			dir := req.Ed25519Pubkey.Directory
			out.Configuration["plugin.security.provider"] = "choria"
			out.Configuration["plugin.security.choria.token_file"] = dir + "/server.jwt"
			out.Configuration["plugin.security.choria.seed_file"] = dir + "/server.seed"
		}
		if req.CSR != nil && req.CSR.SSLDir != nil {
			out.SSLDir = *req.CSR.SSLDir
		}
		out.Upgrade = os.Getenv("PROVISION_HELPER_UPGRADE")
	}
	return out
}

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "could not parse the request on stdin: %v\n", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(decide(req)); err != nil {
		fmt.Fprintf(os.Stderr, "could not write the reply: %v\n", err)
		os.Exit(1)
	}
}
