/**
 * In-memory stand-ins for the engine's ports: a virtual clock, a seeded random source, a scripted
 * Choria RPC that plays a node (with real keys, JWTs and CSRs made here), a pause gate that can be
 * closed at a chosen point, a helper and recording metrics / logger.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import {
  createCsr,
  decryptLegacyPem,
  decodeHex,
  ed25519SigningKey,
  encodeHex,
  generateEd25519Seed,
  generateX25519KeyPair,
  type JwtVerifier,
  mintProvisioningJwt,
  rsaPublicKeyPkcs1Pem,
  type SigningKey,
  signNonce,
  x25519SharedSecret,
} from "../../../lib/crypto";
import type { EngineSettings } from "../../../lib/engine";
import { PausedError, RpcStatusError, RpcTimeoutError } from "../../../lib/errors";
import type {
  AnyMetricName,
  AttemptWindow,
  ChoriaRpc,
  Clock,
  HelperRequest,
  HelperResponse,
  HelperRunner,
  HostWork,
  LogAttributes,
  Logger,
  MetricLabels,
  Metrics,
  PauseGate,
  RpcCall,
  RpcReply,
} from "../../../lib/ports";
import { helperResponseWith } from "../../support/helper-response";

export const START_WALL_MS = Date.UTC(2025, 0, 15, 12, 0, 0);

/** Sleeps advance time instantly; every sleep is recorded. */
export class VirtualClock implements Clock {
  wall = START_WALL_MS;
  mono = 1_000;
  readonly sleeps: number[] = [];

  now(): number {
    return this.wall;
  }
  monotonic(): number {
    return this.mono;
  }
  advance(ms: number): void {
    this.wall += ms;
    this.mono += ms;
  }
  async sleep(ms: number): Promise<void> {
    this.sleeps.push(ms);
    this.advance(ms);
  }
}

export interface MetricRecord {
  type: "gauge" | "count" | "timing";
  name: AnyMetricName;
  value: number;
  labels?: MetricLabels;
}

export class RecordingMetrics implements Metrics {
  readonly records: MetricRecord[] = [];
  gauge(name: AnyMetricName, value: number, labels?: MetricLabels): void {
    this.records.push({ type: "gauge", name, value, labels });
  }
  count(name: AnyMetricName, increment = 1, labels?: MetricLabels): void {
    this.records.push({ type: "count", name, value: increment, labels });
  }
  timing(name: AnyMetricName, seconds: number, labels?: MetricLabels): void {
    this.records.push({ type: "timing", name, value: seconds, labels });
  }
  of(name: AnyMetricName): MetricRecord[] {
    return this.records.filter((record) => record.name === name);
  }
  total(name: AnyMetricName, rpc?: string): number {
    return this.of(name)
      .filter((record) => rpc === undefined || record.labels?.rpc === rpc)
      .reduce((sum, record) => sum + record.value, 0);
  }
}

export interface LogRecord {
  level: "debug" | "info" | "warn" | "error";
  message: string;
  attributes?: LogAttributes;
}

export class RecordingLogger implements Logger {
  readonly records: LogRecord[] = [];
  debug(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "debug", message, attributes });
  }
  info(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "info", message, attributes });
  }
  warn(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "warn", message, attributes });
  }
  error(message: string, attributes?: LogAttributes): void {
    this.records.push({ level: "error", message, attributes });
  }
  text(): string {
    return JSON.stringify(this.records);
  }
}

/** A gate that is open until `close()` or until `closeWhen` says so; records every check. */
export class FakeGate implements PauseGate {
  readonly checks: { term: number; attemptTimeoutMs: number }[] = [];
  closeWhen: () => boolean = () => false;
  failure: Error = new PausedError("provisioning is paused");

  /** With a clock, windows end `attemptTimeoutMs` after the check on it; without, they never end. */
  constructor(private readonly clock?: Clock) {}

  close(failure?: Error): void {
    if (failure) this.failure = failure;
    this.closeWhen = () => true;
  }

  async assertOpen(term: number, attemptTimeoutMs: number): Promise<AttemptWindow> {
    this.checks.push({ term, attemptTimeoutMs });
    if (this.closeWhen()) throw this.failure;
    const endsBy = this.clock ? this.clock.monotonic() + attemptTimeoutMs : Number.POSITIVE_INFINITY;
    return { term, stampedAt: this.clock?.now() ?? Date.now(), endsBy };
  }
}

export type ScriptedAnswer = Record<string, unknown> | Error;
export type Responder = (call: RpcCall) => ScriptedAnswer;

/** Answers per `agent#action`: a queue of scripted answers first, then the default responder. */
export class FakeRpc implements ChoriaRpc {
  readonly calls: RpcCall[] = [];
  private readonly queued = new Map<string, ScriptedAnswer[]>();
  private readonly responders = new Map<string, Responder>();
  /** Runs before each call is answered, e.g. to advance the clock. */
  beforeAnswer: (call: RpcCall) => void = () => {};

  respond(rpc: string, responder: Responder): this {
    this.responders.set(rpc, responder);
    return this;
  }

  queue(rpc: string, ...answers: ScriptedAnswer[]): this {
    this.queued.set(rpc, [...(this.queued.get(rpc) ?? []), ...answers]);
    return this;
  }

  callsTo(rpc: string): RpcCall[] {
    return this.calls.filter((call) => `${call.agent}#${call.action}` === rpc);
  }

  sequence(): string[] {
    return this.calls.map((call) => `${call.agent}#${call.action}`);
  }

  async call(call: RpcCall): Promise<RpcReply> {
    this.calls.push(structuredClone(call));
    this.beforeAnswer(call);
    const rpc = `${call.agent}#${call.action}`;
    const answer = this.queued.get(rpc)?.shift() ?? this.responders.get(rpc)?.(call);
    if (answer === undefined) throw new RpcTimeoutError(call.identity, rpc, "no responder scripted");
    if (answer instanceof Error) throw answer;
    return { sender: call.identity, statuscode: 0, statusmsg: "OK", data: answer };
  }
}

export function timeout(identity: string, rpc: string): RpcTimeoutError {
  return new RpcTimeoutError(identity, rpc, "no reply within the attempt timeout");
}

export function statusError(identity: string, rpc: string, statusmsg = "Incorrect provision token supplied"): RpcStatusError {
  return new RpcStatusError(identity, rpc, identity, 1, statusmsg);
}

export class FakeHelper implements HelperRunner {
  readonly requests: HelperRequest[] = [];
  constructor(public answer: HelperResponse | Error) {}
  async run(request: HelperRequest): Promise<HelperResponse> {
    this.requests.push(structuredClone(request));
    if (this.answer instanceof Error) throw this.answer;
    return structuredClone(this.answer);
  }
}

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
  return {
    features: { jwt: false, ed25519: false, pki: false, upgrades: false },
    token: TOKEN,
    certDenyList: ["\\.privileged.mcollective$", "\\.privileged.choria$", "\\.mcollective$", "\\.choria$"],
    serverJwtValidityMs: 365 * 24 * 3_600_000,
    upgradesRepository: "https://repo.example.net/choria",
    upgradesOptional: false,
    intervalMs: 60_000,
    ...overrides,
  };
}

export function work(overrides: Partial<HostWork> = {}): HostWork {
  return { identity: IDENTITY, term: 7, admittedAt: START_WALL_MS - 1_000, source: "discovery", ...overrides };
}
