/** The helper port: what the provisioning helper is given and answers, and what runs it. */

/** What the helper gets on stdin (keys in the Go daemon's order). */
export interface HelperRequest {
  identity: string;
  csr: { csr: string; public_key: string; ssldir: string } | null;
  ed25519_pubkey: { public_key: string; directory: string; signature: string } | null;
  /** JSON text of the rpcutil#inventory reply data (keys sorted). */
  inventory: string;
  /** Verified provisioning JWT claims, or null when the jwt feature is off. */
  jwt: Record<string, unknown> | null;
}

export interface ServerClaimsOverride {
  ou?: string;
  exp?: number;
  collectives?: string[];
  pub_subjects?: string[];
  permissions?: { submission?: boolean; streams?: boolean; governor?: boolean; service_host?: boolean };
}

/** What the helper answers on stdout, validated. */
export interface HelperResponse {
  defer: boolean;
  shutdown: boolean;
  msg: string;
  configuration: Record<string, string>;
  certificate: string;
  ca: string;
  key: string;
  ssldir: string;
  server_claims: ServerClaimsOverride | null;
  action_policies: Record<string, string>;
  opa_policies: Record<string, string>;
  upgrade: string;
}

export interface HelperRunner {
  run(request: HelperRequest): Promise<HelperResponse>;
}
