import { CsrError } from "../errors";
import { decodeCsr } from "./csr-decode";

/** The provisioner's default `cert_deny_list`, the one definition lib/config uses too (the dots after "privileged" are unescaped upstream too). */
export const DEFAULT_CERT_DENY_LIST: readonly string[] = Object.freeze([
  "\\.privileged.mcollective$",
  "\\.privileged.choria$",
  "\\.mcollective$",
  "\\.choria$",
]);

/**
 * A deny-list entry as a RegExp, or null when it does not compile (Go ignores such entries).
 * `/re/` (at least one character between the slashes) loses all leading and trailing slashes.
 */
function denyPattern(pattern: string): RegExp | null {
  const source = /^\/.+\/$/s.test(pattern) ? pattern.replace(/^\/+/, "").replace(/\/+$/, "") : pattern;
  try {
    return new RegExp(source);
  } catch {
    return null;
  }
}

/**
 * The provisioner's CSR checks (docs/protocol.md §9.7): present, parseable, CN equal to the identity,
 * and neither the CN nor any DNS SAN matching `denyList`. Throws CsrError.
 */
export function validateCsr(pem: string | undefined, identity: string, denyList: readonly string[]): void {
  if (pem === undefined || pem === "") throw new CsrError("no CSR received");
  const { commonName, dnsNames } = decodeCsr(pem);
  if (commonName !== identity) throw new CsrError(`common name ${commonName} does not match identity ${identity}`);
  const patterns = denyList.map(denyPattern).filter((pattern): pattern is RegExp => pattern !== null);
  for (const name of [commonName, ...dnsNames]) {
    if (patterns.some((pattern) => pattern.test(name))) {
      throw new CsrError(`${name} matches denied certificate pattern`);
    }
  }
}
