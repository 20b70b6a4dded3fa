/**
 * How a go-choria server takes its provisioning settings from its `provisioning.jwt` at start
 * (providers/provtarget/builddefaults `SetBuildBasedOnJWT`): the file is read unverified
 * (tokens `ParseProvisionTokenUnverified`: a JWT with a registered alg, typed claims and `sub` or
 * `purpose` "choria_provisioning"), then it needs a token and exactly one of broker URLs or an SRV
 * domain. A file that fails leaves the build defaults alone, so the server never enters
 * provisioning mode. Signature and expiry are the broker's and the provisioner's business.
 */
import { parseProvisioningJwtUnverified } from "../../test/support/choria-node/provisioning-jwt";
import type { ProtocolVersion } from "../../lib/choria/envelope";

interface NodeProvisioningSettings {
  /** `cht`: the token every choria_provision action must carry. */
  token: string;
  /** `chu`, comma separated. */
  urls: string;
  /** `chsrv`. */
  srvDomain: string;
  /** `chpd`: provisioning mode unless the config sets plugin.choria.server.provision. */
  provisionDefault: boolean;
  /** `chs`. */
  secure: boolean;
  /** `v2`. */
  protocolVersion: ProtocolVersion;
  /** `update`: release_update allowed. */
  allowUpdate: boolean;
}

export type ProvisioningJwtReading = { ok: true; settings: NodeProvisioningSettings } | { ok: false; reason: string };

/** Reads the file's content exactly as given (a trailing newline is fine, as it is in Go). */
export function readProvisioningJwtFile(content: string): ProvisioningJwtReading {
  let claims;
  try {
    claims = parseProvisioningJwtUnverified(content);
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
  if (claims.cht === "") return { ok: false, reason: "no auth token" };
  const urls = claims.chu ?? "";
  const srvDomain = claims.chsrv ?? "";
  if (urls === "" && srvDomain === "") return { ok: false, reason: "no srv domain or urls" };
  if (urls !== "" && srvDomain !== "") return { ok: false, reason: "both srv domain and URLs supplied" };
  return {
    ok: true,
    settings: {
      token: claims.cht,
      urls,
      srvDomain,
      provisionDefault: claims.chpd,
      secure: claims.chs,
      protocolVersion: claims.v2 === true ? 2 : 1,
      allowUpdate: claims.update === true,
    },
  };
}
