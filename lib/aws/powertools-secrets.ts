import { getParameter } from "@aws-lambda-powertools/parameters/ssm";
import { getSecret } from "@aws-lambda-powertools/parameters/secrets";
import { formatSecretReference, type SecretReference, type SecretResolver } from "../config/secrets";
import { SecretResolutionError } from "../errors";

export interface PowertoolsSecretResolverOptions {
  /** Seconds a fetched value is cached across warm invocations (Powertools `maxAge`). */
  maxAgeSeconds?: number;
}

/**
 * Resolves `ssm:` references with decryption and `secretsmanager:` references through the
 * Powertools parameters utility, which caches values for `maxAgeSeconds` across invocations.
 */
export function createPowertoolsSecretResolver(options: PowertoolsSecretResolverOptions = {}): SecretResolver {
  const maxAge = options.maxAgeSeconds ?? 300;
  return {
    async resolve(reference: SecretReference): Promise<string> {
      const value =
        reference.store === "ssm"
          ? await getParameter(reference.name, { decrypt: true, maxAge })
          : await getSecret(reference.name, { maxAge });
      if (typeof value === "string") return value;
      if (value instanceof Uint8Array) return new TextDecoder().decode(value);
      throw new SecretResolutionError(`${formatSecretReference(reference)} has no value`);
    },
  };
}
