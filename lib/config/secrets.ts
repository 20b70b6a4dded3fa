import { ProvisionerError } from "../errors";

/** Where a secret lives: SSM Parameter Store (decrypted SecureString) or Secrets Manager. */
export type SecretStore = "ssm" | "secretsmanager";

export interface SecretReference {
  store: SecretStore;
  /** Parameter name (`/path/name`) or secret name / ARN. */
  name: string;
}

/**
 * Fetches a secret's plain value. The AWS implementation is in `powertools-secrets.ts` so the
 * configuration module itself never imports an AWS client.
 */
export interface SecretResolver {
  resolve(reference: SecretReference): Promise<string>;
}

/** A secret store could not give a value; the message names the reference, never a value. */
export class SecretResolutionError extends ProvisionerError {}

/** Configuration keys whose values are credentials: redacted from every rendering of the config. */
export const SECRET_KEYS = [
  "token",
  "broker_provisioning_password",
  "jwt_signing_key",
  "jwt_signing_token",
  "nats_token",
  "client_jwt",
  "client_seed",
] as const;

export type SecretKey = (typeof SECRET_KEYS)[number];

const REFERENCE = /^(ssm|secretsmanager):(.+)$/;

/** Returns the reference a config value names, or undefined for a literal value. */
export function parseSecretReference(value: string): SecretReference | undefined {
  const match = REFERENCE.exec(value);
  if (!match?.[1] || !match[2]) return undefined;
  return { store: match[1] as SecretStore, name: match[2] };
}

export function formatSecretReference(reference: SecretReference): string {
  return `${reference.store}:${reference.name}`;
}
