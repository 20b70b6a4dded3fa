/**
 * Cryptographic and version primitives of the Choria provisioner and its fleet simulator
 * (docs/protocol.md §9): ids, provisioning / server JWTs and trust chains, X25519, legacy PEM
 * encryption, nonce signatures, CSRs and rpm version comparison.
 */
export { decodeBase64Url, decodeHex, encodeBase64Url, encodeHex } from "./encoding";
export { ksuid, ksuidTime, parseKsuid, replySubjectHash, uuidHex } from "./ids";
export {
  ed25519PrivateKeyFromSeed,
  ed25519PublicKeyFromRaw,
  ed25519SigningKey,
  generateEd25519Seed,
  loadSigningKey,
  rawPublicKey,
  rsaSigningKey,
  type SigningKey,
} from "./keys";
export {
  decodeJwt,
  helperJwtClaims,
  jwtVerifierFromContent,
  loadJwtVerifier,
  parseProvisioningJwtUnverified,
  signJwt,
  verifyJwtSignature,
  verifyProvisioningJwt,
  type JwtVerifier,
  type ProvisioningClaims,
} from "./jwt";
export {
  addChainIssuerData,
  buildServerClaims,
  mintChainIssuerToken,
  mintProvisioningJwt,
  serverJwtSettings,
  verifyChainedServerJwt,
} from "./server-jwt";
export { EcdhError, generateX25519KeyPair, x25519PublicKey, x25519SharedSecret } from "./ecdh";
export { decryptLegacyPem, deriveLegacyPemKey, encryptLegacyPem, LegacyPemError } from "./legacy-pem";
export { signNonce, verifyNonceSignature } from "./nonce";
export { createCsr, DEFAULT_CERT_DENY_LIST, parseCsr, rsaPublicKeyPkcs1Pem, validateCsr, verifyCsrSignature } from "./csr";
export { compareVersions, rpmvercmp } from "./version";
export { certificateValidity } from "./certificate";
