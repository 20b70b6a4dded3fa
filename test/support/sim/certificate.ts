/**
 * An X.509 certificate with a chosen validity, built in-process (openssl takes milliseconds a run
 * cannot spend per provisioning): what the simulated helper hands out, so the engine records the
 * expiry renewal works from, and the node knows when its credentials run out.
 */
import { generateKeyPairSync, sign } from "node:crypto";
import { bitString, oid, sequence, set, smallInteger, tlv } from "../choria-node/der-writer";
import { TAG } from "../../../lib/crypto/der";

const UTC_TIME = 0x17;
const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
const SPKI = publicKey.export({ type: "spki", format: "der" });
const ECDSA_WITH_SHA256 = sequence(oid("1.2.840.10045.4.3.2"));

function utcTime(ms: number): Uint8Array {
  const text = new Date(ms).toISOString().replace(/[-:T]/g, "").slice(2, 14) + "Z";
  return tlv(UTC_TIME, new TextEncoder().encode(text));
}

const commonName = (name: string) => sequence(set(sequence(oid("2.5.4.3"), tlv(TAG.utf8String, new TextEncoder().encode(name)))));

/** A PEM certificate for `name`, valid from `notBeforeMs` to `notAfterMs` (whole seconds). */
export function certificateValidUntil(name: string, notBeforeMs: number, notAfterMs: number): string {
  const tbs = sequence(smallInteger(1), ECDSA_WITH_SHA256, commonName("sim-ca"), sequence(utcTime(notBeforeMs), utcTime(notAfterMs)), commonName(name), SPKI);
  const signature = sign("sha256", tbs, privateKey);
  const der = Buffer.from(sequence(tbs, ECDSA_WITH_SHA256, bitString(signature)));
  const lines = der.toString("base64").match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join("\n")}\n-----END CERTIFICATE-----\n`;
}
