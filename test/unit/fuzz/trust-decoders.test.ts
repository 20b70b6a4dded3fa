/**
 * Property fuzzing of the decoders that judge what a node or a helper hands back: helper output,
 * the node's provisioning JWT, its CSR, and the provisioner configuration. Each may only fail with
 * its named error (HelperError, JwtError, CsrError, ConfigError).
 */
import { generateKeyPairSync } from "node:crypto";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { createCsr, parseCsr } from "../../support/choria-node/csr";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { encodeBase64Url } from "../../../lib/crypto/encoding";
import { type JwtVerifier, signJwt, verifyProvisioningJwt } from "../../../lib/crypto/jwt";
import { mintProvisioningJwt } from "../../support/choria-node/server-jwt";
import type { SigningKey } from "../../../lib/crypto/keys";
import { validateCsr } from "../../../lib/crypto/csr";
import { ConfigError, CsrError, HelperError, JwtError } from "../../../lib/errors";
import { decodeHelperResponse } from "../../../lib/helper/codec";
import { recordScenario } from "../../support/chaos/scenario";
import { FUZZ_RUNS, FUZZ_SEED, expectOnly, expectOnlyAsync, mutatedBytes, mutatedText } from "./support";

const encoder = new TextEncoder();
const json = (value: unknown) => encoder.encode(JSON.stringify(value));
const NOW = new Date(Date.UTC(2026, 0, 1));
const NOW_SECONDS = Math.trunc(NOW.getTime() / 1000);

const fieldArb = (expected: fc.Arbitrary<unknown>) => fc.oneof({ weight: 3, arbitrary: expected }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });
const stringMapArb = fc.dictionary(fc.string({ maxLength: 8 }), fieldArb(fc.string({ maxLength: 8 })), { maxKeys: 3 });

const helperOutputArb = fc.record(
  {
    defer: fieldArb(fc.boolean()),
    shutdown: fieldArb(fc.boolean()),
    msg: fieldArb(fc.string()),
    configuration: fieldArb(stringMapArb),
    certificate: fieldArb(fc.string()),
    ca: fieldArb(fc.string()),
    key: fieldArb(fc.string()),
    ssldir: fieldArb(fc.string()),
    server_claims: fieldArb(
      fc.record(
        {
          ou: fieldArb(fc.string()),
          exp: fieldArb(fc.integer()),
          collectives: fieldArb(fc.array(fc.string(), { maxLength: 2 })),
          pub_subjects: fieldArb(fc.array(fc.string(), { maxLength: 2 })),
          permissions: fieldArb(fc.record({ submission: fieldArb(fc.boolean()), streams: fieldArb(fc.boolean()) }, { requiredKeys: [] })),
        },
        { requiredKeys: [] },
      ),
    ),
    action_policies: fieldArb(stringMapArb),
    opa_policies: fieldArb(stringMapArb),
    upgrade: fieldArb(fc.string()),
  },
  { requiredKeys: [] },
);

describe("fuzz: helper output", () => {
  it("decodeHelperResponse throws only HelperError and returns fully typed responses", ({ task }) => {
    // Arrange
    const inputs = fc.oneof(
      fc.uint8Array({ maxLength: 200 }),
      fc.jsonValue({ maxDepth: 3 }).map(json),
      helperOutputArb.map(json),
      helperOutputArb.chain((output) => mutatedBytes(json(output))),
    );
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (bytes) => {
        tried += 1;
        const response = expectOnly(() => decodeHelperResponse(bytes, "helper"), [HelperError]);
        if (response === undefined) return;
        expect(typeof response.defer).toBe("boolean");
        expect(typeof response.shutdown).toBe("boolean");
        for (const text of [response.msg, response.certificate, response.ca, response.key, response.ssldir, response.upgrade]) expect(typeof text).toBe("string");
        for (const map of [response.configuration, response.action_policies, response.opa_policies]) {
          expect(Object.values(map).every((value) => typeof value === "string")).toBe(true);
        }
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("never quotes helper output in its errors (it may carry a private key)", () => {
    // Arrange
    const secret = "-----BEGIN RSA PRIVATE KEY-----SECRETMATERIAL";
    const outputs = [encoder.encode(`${secret} not json`), json({ key: 42, certificate: secret }), json({ configuration: { a: 1 }, key: secret })];

    // Act
    const messages = outputs.map((output) => {
      try {
        decodeHelperResponse(output, "helper");
        return "accepted";
      } catch (error) {
        return (error as Error).message;
      }
    });

    // Assert
    for (const message of messages) {
      expect(message).toMatch(/^cannot decode output from helper/);
      expect(message).not.toContain("SECRETMATERIAL");
    }
  });
});

describe("fuzz: provisioning JWT", () => {
  let signer: SigningKey;
  let verifier: JwtVerifier;
  let token: string;
  const claims = { cht: "s3cret", chs: false, chpd: true, purpose: "choria_provisioning", iat: NOW_SECONDS - 60, nbf: NOW_SECONDS - 60, exp: NOW_SECONDS + 3600, jti: "x" };

  beforeAll(async () => {
    signer = ed25519SigningKey(generateEd25519Seed());
    verifier = { kind: "ed25519", publicKey: signer.publicKey };
    token = await mintProvisioningJwt(claims, signer);
  });

  it("verifyProvisioningJwt throws only JwtError on mutated tokens, and a token that still verifies carries the original claims", async ({ task }) => {
    // Arrange
    const mutations = () => mutatedText(token);
    let tried = 0;

    // Act / Assert
    await fc.assert(
      fc.asyncProperty(fc.constant(null).chain(mutations), async (mutated) => {
        tried += 1;
        const verified = await expectOnlyAsync(() => verifyProvisioningJwt(mutated, verifier, NOW), [JwtError]);
        if (verified !== undefined) expect(verified.raw).toEqual(claims);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });

  it("rejects re-signed tokens with hostile headers and claim types with JwtError", async ({ task }) => {
    // Arrange
    const foreign = ed25519SigningKey(generateEd25519Seed());
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const headerArb = fc.record({ alg: fieldArb(fc.constantFrom("none", "HS256", "EdDSA", "RS256", "ES256", "")), typ: fieldArb(fc.constant("JWT")) }, { requiredKeys: [] });
    const claimsArb = fc.record(
      {
        cht: fieldArb(fc.string()),
        chpd: fieldArb(fc.boolean()),
        purpose: fieldArb(fc.constantFrom("choria_provisioning", "other")),
        exp: fieldArb(fc.integer({ min: NOW_SECONDS - 10, max: NOW_SECONDS + 10 })),
        nbf: fieldArb(fc.integer({ min: NOW_SECONDS - 10, max: NOW_SECONDS + 10 })),
        tcs: fieldArb(fc.string()),
        iss: fieldArb(fc.constantFrom("C-abc", "I-abc")),
        issexp: fieldArb(fc.integer({ min: NOW_SECONDS - 10, max: NOW_SECONDS + 10 })),
        aud: fieldArb(fc.array(fc.string(), { maxLength: 2 })),
        extensions: fieldArb(fc.object({ maxDepth: 1 })),
      },
      { requiredKeys: [] },
    );
    const signatureArb = fc.constantFrom("own", "foreign", "rsa", "empty");
    let tried = 0;

    // Act / Assert
    await fc.assert(
      fc.asyncProperty(headerArb, claimsArb, signatureArb, async (header, body, signature) => {
        tried += 1;
        const input = `${encodeBase64Url(JSON.stringify(header))}.${encodeBase64Url(JSON.stringify(body))}`;
        const signed =
          signature === "empty"
            ? `${input}.`
            : `${input}.${(await signJwt(body, signature === "own" ? signer : signature === "foreign" ? foreign : { alg: "RS256", privateKey: rsa.privateKey, publicKey: rsa.publicKey })).split(".")[2]}`;
        await expectOnlyAsync(() => verifyProvisioningJwt(signed, verifier, NOW), [JwtError]);
      }),
      { numRuns: Math.min(FUZZ_RUNS, 200), seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });
});

describe("fuzz: CSR", () => {
  let csr: string;

  beforeAll(() => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 1024 });
    csr = createCsr({ commonName: "node1.example.net", privateKey, dnsNames: ["node1.example.net"] });
  });

  it("parseCsr and validateCsr throw only CsrError on mutated and arbitrary PEM", ({ task }) => {
    // Arrange
    const body = () => csr.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "");
    const wrap = (der: Uint8Array) => `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from(der).toString("base64")}\n-----END CERTIFICATE REQUEST-----\n`;
    const inputs = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.constant(null).chain(() => mutatedText(csr)),
      fc.constant(null).chain(() => mutatedBytes(new Uint8Array(Buffer.from(body(), "base64")))).map(wrap),
      fc.uint8Array({ maxLength: 200 }).map(wrap),
    );
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(inputs, (pem) => {
        tried += 1;
        const parsed = expectOnly(() => parseCsr(pem), [CsrError]);
        if (parsed !== undefined) {
          expect(typeof parsed.commonName).toBe("string");
          expect(parsed.dnsNames.every((name) => typeof name === "string")).toBe(true);
        }
        expectOnly(() => validateCsr(pem, "node1.example.net", ["\\.choria$", "(unclosed"]), [CsrError]);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });
});

describe("fuzz: configuration", () => {
  it("parseConfig throws only ConfigError for any YAML-shaped document", ({ task }) => {
    // Arrange
    const minimal = { helper: "/bin/helper", broker_urls: ["nats://b.example.net:4222"] };
    const keys = [
      "workers", "interval", "loglevel", "helper", "token", "lifecycle_component", "site", "monitor_port", "broker_urls", "cert_deny_list",
      "protocol_version", "client_jwt", "client_seed", "rpc_ttl", "discovery_timeout", "helper_timeout", "server_jwt_validity", "lease", "features", "tls",
      "helper_function", "leader_election", "upgrades_repository",
    ];
    const valueArb = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom("1m", "0s", "-5s", "10", "1h2m", "5x", "", "nats://a:1", "(", "*", "1e400"),
      fc.record({ duration: fc.string(), renew_interval: fc.constantFrom("1s", "30s", "x"), skew_bound: fc.constantFrom("0s", "-1s", "40s") }, { requiredKeys: [] }),
      fc.record({ pki: fc.boolean(), ed25519: fc.boolean(), jwt: fc.jsonValue(), upgrades: fc.boolean() }, { requiredKeys: [] }),
    );
    const documentArb = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.dictionary(fc.constantFrom(...keys), valueArb, { maxKeys: 4 }).map((overrides) => ({ ...minimal, ...overrides })),
    );
    let tried = 0;

    // Act / Assert
    fc.assert(
      fc.property(documentArb, (document) => {
        tried += 1;
        expectOnly(() => parseConfig(document, { env: {} }), [ConfigError]);
      }),
      { numRuns: FUZZ_RUNS, seed: FUZZ_SEED },
    );
    recordScenario(task, { area: "fuzz", badInputs: tried });
  });
});
