import { settingsWhere, type ReferenceSetting, type SecretKey } from "./keys";
import { REFERENCE_SHAPES, describeShape } from "./shapes";

/** Where a secret lives: SSM Parameter Store (decrypted SecureString) or Secrets Manager. */
type SecretStore = "ssm" | "secretsmanager";

export interface SecretReference {
  store: SecretStore;
  /** Parameter name (`/path/name`) or secret name / ARN. */
  name: string;
}

/**
 * Fetches a secret's plain value. The AWS implementation is in `lib/aws/powertools-secrets.ts` so the
 * configuration module itself never imports an AWS client.
 */
export interface SecretResolver {
  resolve(reference: SecretReference): Promise<string>;
}

/** Configuration keys whose values are credentials (lib/config/keys.ts `secret`): redacted from every rendering of the config. */
export const SECRET_KEYS = settingsWhere<SecretKey>((spec) => spec.secret === true);

/** Every setting that may be written as an `ssm:` / `secretsmanager:` reference (dotted for nested keys). */
export const REFERENCE_SETTINGS = settingsWhere<ReferenceSetting>((spec) => spec.reference !== undefined);

/** The deployed functions (serverless.yml `functions:` keys). */
export const FUNCTION_NAMES = [
  "discover",
  "leaseKeeper",
  "lifecycle",
  "provision",
  "status",
  "reprovision",
  "release",
  "renew",
] as const;

export type FunctionName = (typeof FUNCTION_NAMES)[number];

/** What connecting to the broker and signing requests needs (lib/config/keys.ts `usedBy`). */
const BROKER_SETTINGS = settingsWhere<ReferenceSetting>((spec) => spec.usedBy === "broker");
/** What configuring a node needs on top: the token it is given and the JWT keys. */
const PROVISIONING_SETTINGS = settingsWhere<ReferenceSetting>((spec) => spec.usedBy === "provisioning");

/**
 * The reference settings each function uses: its loader resolves only these and its IAM role may
 * read only their parameters and secrets (config/deployment.cjs asks `check-config` for them).
 * Every function that may win a lease term connects to the broker (the new leader announces itself
 * and discovers at once); only `provision` configures nodes, and `renew` sends them the token with
 * reprovision; `status` and `release` touch neither.
 */
export const FUNCTION_SETTINGS: Readonly<Record<FunctionName, readonly ReferenceSetting[]>> = {
  discover: BROKER_SETTINGS,
  leaseKeeper: BROKER_SETTINGS,
  lifecycle: BROKER_SETTINGS,
  provision: [...BROKER_SETTINGS, ...PROVISIONING_SETTINGS],
  status: [],
  reprovision: BROKER_SETTINGS,
  release: [],
  // The main broker takes the same client credentials; the node's choria_provision agent checks the token.
  renew: [...BROKER_SETTINGS, "token"],
};

/** Whether a function (or, unset, a local run of every function) uses a setting. */
export function functionUses(fn: FunctionName | undefined, setting: ReferenceSetting): boolean {
  return fn === undefined || FUNCTION_SETTINGS[fn].includes(setting);
}

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

/** Reads a dotted setting (`tls.key`) from a parsed YAML document. */
export function settingValue(document: Record<string, unknown>, setting: string): unknown {
  const [section, key] = setting.split(".", 2);
  if (key === undefined) return document[setting];
  const nested = document[section as string];
  return nested !== null && typeof nested === "object" && !Array.isArray(nested) ? (nested as Record<string, unknown>)[key] : undefined;
}

function setSettingValue(document: Record<string, unknown>, setting: string, value: string): void {
  const [section, key] = setting.split(".", 2);
  if (key === undefined) {
    document[setting] = value;
    return;
  }
  // Copy the section: PROVISIONER_CONFIG_YAML sections may be shared with the file's document.
  document[section as string] = { ...(document[section as string] as Record<string, unknown>), [key]: value };
}

/**
 * Replaces the references of the given settings with their values, in place. References of other
 * settings stay as written: `keyMaterial` (lib/app) refuses to use one.
 */
export async function resolveReferences(
  document: Record<string, unknown>,
  settings: readonly ReferenceSetting[],
  resolver: SecretResolver | undefined,
  onError: (setting: string, message: string, cause?: unknown) => Error,
): Promise<void> {
  await Promise.all(
    settings.map(async (setting) => {
      const value = settingValue(document, setting);
      if (typeof value !== "string") return;
      const reference = parseSecretReference(value);
      if (!reference) return;
      const where = formatSecretReference(reference);
      if (!resolver) throw onError(setting, `${where} needs a secret resolver, none is configured`);
      let resolved: string;
      try {
        resolved = await resolver.resolve(reference);
      } catch (error) {
        throw onError(setting, `could not resolve ${where}`, error);
      }
      // The value is the material itself; one of another shape would otherwise be read as a
      // file path and printed in the error that reports it. Say what it looks like, never what it is.
      const shape = REFERENCE_SHAPES[setting];
      if (!shape.accepts(resolved)) {
        throw onError(setting, `${where} resolved to ${describeShape(resolved)}; expected ${shape.expected}`);
      }
      setSettingValue(document, setting, resolved);
    }),
  );
}
