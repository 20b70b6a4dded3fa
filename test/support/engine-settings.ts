import { DEFAULT_CERT_DENY_LIST } from "../../lib/crypto/csr";
import type { EngineSettings } from "../../lib/engine/settings";

export type EngineSettingsOverrides = Partial<Omit<EngineSettings, "features">> & { features?: Partial<EngineSettings["features"]> };

/**
 * Engine settings as the tests' deployments have them: no features, the Go daemon's certificate
 * deny list, server JWTs valid for a year, a one-minute interval; `token` and `overrides` as given.
 */
export function engineSettings(token: string, overrides: EngineSettingsOverrides = {}): EngineSettings {
  const { features, ...rest } = overrides;
  return {
    features: { jwt: false, ed25519: false, pki: false, upgrades: false, ...features },
    token,
    certDenyList: DEFAULT_CERT_DENY_LIST,
    serverJwtValidityMs: 365 * 24 * 3_600_000,
    upgradesRepository: "https://repo.example.net/choria",
    upgradesOptional: false,
    intervalMs: 60_000,
    ...rest,
  };
}
