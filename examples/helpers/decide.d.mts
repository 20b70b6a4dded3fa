/** Types of the zero-dependency decision module shared by the example helpers. */
export interface HelperInput {
  identity: string;
  csr: { csr: string; public_key: string; ssldir: string } | null;
  ed25519_pubkey: { public_key: string; directory: string; signature: string } | null;
  inventory: string;
  jwt: Record<string, unknown> | null;
}

export interface HelperOutput {
  defer: boolean;
  shutdown: boolean;
  msg: string;
  configuration: Record<string, string>;
  certificate: string;
  ca: string;
  key: string;
  ssldir: string;
  upgrade?: string;
}

export const DEFAULT_BROKERS: string;

export function decide(request: HelperInput, env: Record<string, string | undefined>): HelperOutput;
