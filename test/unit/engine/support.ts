/**
 * What the engine's unit tests add to the shared fakes (test/support/fakes.ts): a node that the
 * scripted Choria RPC plays (with real keys, JWTs and CSRs made here), the usual helper answer,
 * engine settings and host work.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { createCsr, rsaPublicKeyPkcs1Pem } from "../../support/choria-node/csr";
import { decryptLegacyPem } from "../../support/choria-node/legacy-pem";
import { decodeHex, encodeHex } from "../../../lib/crypto/encoding";
import { ed25519SigningKey, generateEd25519Seed } from "../../support/choria-node/keys";
import { generateX25519KeyPair, x25519SharedSecret } from "../../../lib/crypto/ecdh";
import type { JwtVerifier } from "../../../lib/crypto/jwt";
import { mintProvisioningJwt } from "../../support/choria-node/server-jwt";
import type { SigningKey } from "../../../lib/crypto/keys";
import { signNonce } from "../../support/choria-node/nonce";
import type { EngineSettings } from "../../../lib/engine/settings";
import type { HelperResponse } from "../../../lib/ports/helper";
import type { HostWork } from "../../../lib/ports/host-work";
import { engineSettings } from "../../support/engine-settings";
import type { FakeRpc } from "../../support/fakes";
import { helperResponseWith } from "../../support/helper-response";

export const START_WALL_MS = Date.UTC(2025, 0, 15, 12, 0, 0);

/** The engine tests' usual answer: configure node1 and take it out of provisioning mode. */
export function helperResponse(overrides: Partial<HelperResponse> = {}): HelperResponse {
  return helperResponseWith({ configuration: { "plugin.choria.server.provision": "false", identity: "node1.example.net" }, ...overrides });
}

export const TOKEN = "s3cret-provisioning-token";
export const IDENTITY = "node1.example.net";

/** Keys the test run makes once: the JWT issuer, the provisioner's signing seed, an RSA key. */
export interface TestKeys {
  issuer: SigningKey;
  verifier: JwtVerifier;
  signingKey: SigningKey;
  rsaKey: KeyObject;
  rsaKeyPem: string;
}

export function makeTestKeys(): TestKeys {
  const issuer = ed25519SigningKey(generateEd25519Seed());
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return {
    issuer,
    verifier: { kind: "ed25519", publicKey: issuer.publicKey },
    signingKey: ed25519SigningKey(generateEd25519Seed()),
    rsaKey: privateKey,
    rsaKeyPem: privateKey.export({ format: "pem", type: "pkcs1" }).toString(),
  };
}

/**
 * A provisioning-mode node as the engine meets it: answers jwt (a fresh X25519 key per call),
 * gen25519 (a fresh Ed25519 key signing the nonce), inventory and gencsr like go-choria does.
 */
export class FakeNode {
  ecdhPrivate: Uint8Array = new Uint8Array(32);
  ed25519Seed: Uint8Array = new Uint8Array(32);
  inventory: Record<string, unknown> = {
    agents: ["choria_provision", "choria_util", "discovery", "rpcutil"],
    classes: null,
    collectives: ["provisioning"],
    data_plugins: [],
    facts: { zone: "a<b>&c", "10": "ten", "9": "nine" },
    machines: [],
    main_collective: "provisioning",
    version: "0.30.0",
    upgradable: true,
  };
  ssldir = "/etc/choria/ssl";
  directory = "/etc/choria";
  csrCommonName: string;
  csrDnsNames: string[] = [];

  constructor(
    readonly identity: string,
    private readonly keys: TestKeys,
    public provisioningJwt: string,
  ) {
    this.csrCommonName = identity;
  }

  static async create(identity: string, keys: TestKeys, nowMs: number): Promise<FakeNode> {
    const iat = Math.floor(nowMs / 1000);
    const jwt = await mintProvisioningJwt(
      { cht: TOKEN, chs: true, chpd: true, ou: "choria", purpose: "choria_provisioning", iat, nbf: iat, exp: iat + 3600 },
      keys.issuer,
    );
    return new FakeNode(identity, keys, jwt);
  }

  /** Scripts `rpc` with this node's default answers. */
  install(rpc: FakeRpc): FakeRpc {
    return rpc
      .respond("choria_provision#jwt", () => {
        const pair = generateX25519KeyPair();
        this.ecdhPrivate = pair.privateKey;
        return { jwt: this.provisioningJwt, ecdh_public: encodeHex(pair.publicKey) };
      })
      .respond("choria_provision#gen25519", (call) => {
        this.ed25519Seed = generateEd25519Seed();
        const signed = signNonce(this.ed25519Seed, String(call.data.nonce));
        return { public_key: signed.publicKeyHex, directory: this.directory, signature: signed.signatureHex };
      })
      .respond("rpcutil#inventory", () => structuredClone(this.inventory))
      .respond("choria_provision#gencsr", () => ({
        csr: createCsr({ commonName: this.csrCommonName, dnsNames: this.csrDnsNames, privateKey: this.keys.rsaKey }),
        public_key: rsaPublicKeyPkcs1Pem(this.keys.rsaKey),
        ssldir: this.ssldir,
      }))
      .respond("choria_provision#configure", () => ({ message: "Wrote 3 lines to /etc/choria/server.conf" }))
      .respond("choria_provision#restart", () => ({ message: "Restarting Choria Server after 2s" }))
      .respond("choria_provision#shutdown", () => ({ message: "Shutting Choria Server down after 1s" }))
      .respond("choria_provision#release_update", () => ({ message: "Restarting Choria Server after 2s" }));
  }

  ed25519PublicKeyHex(): string {
    return signNonce(this.ed25519Seed, "").publicKeyHex;
  }

  /** What the node's configure would decrypt from `key` with the provisioner's `ecdh_public`. */
  decryptKey(encryptedPem: string, provisionerEcdhPublicHex: string): Uint8Array {
    const shared = x25519SharedSecret(this.ecdhPrivate, decodeHex(provisionerEcdhPublicHex));
    return decryptLegacyPem(encryptedPem, shared);
  }
}

export function settings(overrides: Partial<EngineSettings> = {}): EngineSettings {
  return engineSettings(TOKEN, overrides);
}

export function work(overrides: Partial<HostWork> = {}): HostWork {
  return { identity: IDENTITY, term: 7, admittedAt: START_WALL_MS - 1_000, source: "discovery", ...overrides };
}
