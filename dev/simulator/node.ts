/**
 * One simulated Choria Server in provisioning mode (docs/protocol.md §4.4, §5, §6, §8): the receive
 * pipeline after envelope decoding, the discovery / rpcutil / choria_provision agents with the
 * Go server's checks and status texts, the per-caller provisioning lock, and the restart / upgrade
 * / shutdown life cycle. It knows nothing of NATS: the fleet feeds it decoded requests and
 * publishes what it answers, so its logic is unit-testable with an injected clock.
 *
 * A node that leaves provisioning mode stops answering the provisioning subjects altogether (a real
 * one reconnects to its production broker), so the Go agent's "not in provisioning mode" guards can
 * never fire here and are not modelled; nor is a missing config file (always /etc/choria/server.conf).
 * In normal mode it answers one request on its main collective: `choria_provision#reprovision`
 * (token checked, config rewritten to provisioning mode, restart after Go's 2 + rand[0,10) s), the
 * renewal path; it does not verify request signatures or model RPC authorization, which a test
 * plays with a `status` fault instead.
 */
import type { KeyObject } from "node:crypto";
import { buildLifecycleEvent, type LifecycleEvent, type LifecycleType } from "../../lib/choria/lifecycle";
import { matchesFilter } from "../../test/support/choria-node/filter";
import { type IncomingRequest, withinTtl } from "../../test/support/choria-node/protocol";
import type { ProtocolVersion } from "../../lib/choria/envelope";
import { createCsr, rsaPublicKeyPkcs1Pem } from "../../test/support/choria-node/csr";
import { decodeHex, encodeHex } from "../../lib/crypto/encoding";
import { decodeJwt } from "../../lib/crypto/jwt";
import { ed25519SigningKey, generateEd25519Seed } from "../../test/support/choria-node/keys";
import { decryptLegacyPem } from "../../test/support/choria-node/legacy-pem";
import { generateX25519KeyPair, x25519SharedSecret } from "../../lib/crypto/ecdh";
import { signNonce } from "../../test/support/choria-node/nonce";
import { goDuration } from "../../lib/engine/go-duration";
import type { Clock } from "../../lib/ports/clock";
import { goConfigBool, ServerConfigParseError, writeServerConfig } from "./config-file";
import { type NodeFaults, type ProvisioningJwtFault, selects, selectsIfSet } from "./faults";
import { type ParsedData, parseRequestData, REQUEST_SHAPES, RequestDataError } from "./request-data";
import { ProvisionerError } from "../../lib/errors";

export const PROVISIONING_COLLECTIVE = "provisioning";
const PROVISION_MODE_COMPONENT = "provision_mode_server";
const DEFAULT_CONFIG_FILE = "/etc/choria/server.conf";
export const PROVISIONING_AGENTS = ["choria_provision", "choria_util", "discovery", "rpcutil"] as const;

/** Go's provisioning lock window. */
export const LOCK_WINDOW_MS = 2 * 60 * 1000;
/** Agent timeouts (DDL): a handler slower than this produces no reply. */
const AGENT_TIMEOUT_MS: Record<string, number> = {
  choria_provision: 20_000,
  rpcutil: 2_000,
  discovery: 2_000,
  choria_util: 2_000,
};

const STATUS = { OK: 0, Aborted: 1, UnknownAction: 2, InvalidData: 4 } as const;

/** One request a node received, and what came of it. */
export interface RpcRecord {
  /** When the node received the request (node clock, epoch ms). */
  timeMs: number;
  /** When the node ran the action (node clock); absent for dropped requests. */
  executedAtMs?: number;
  identity: string;
  /** `<senderid>.<callerid>`: the provisioning lock key. */
  caller: string;
  agent: string;
  action: string;
  requestId: string;
  outcome: number | "dropped";
  statusmsg?: string;
  reason?: string;
}

export interface NodeOptions {
  identity: string;
  version: string;
  protocolVersion: ProtocolVersion;
  /**
   * The provisioning JWT's `cht`. Empty: the node never enters provisioning mode, as a go-choria
   * server ignores a provisioning.jwt without a token ("no auth token").
   */
  token: string;
  /** Why the node's provisioning.jwt would not configure provisioning (it then never enters the mode). */
  provisioningJwtRefused?: string;
  /** The JWT's `chpd`: provisioning mode when the config does not set plugin.choria.server.provision. */
  provisionDefault: boolean;
  /** plugin.choria.server.provision.allow_update or the JWT `update` claim. */
  upgradable: boolean;
  facts: Record<string, unknown>;
  configFile?: string;
  /** Config the node starts with (and comes back with after a crash). */
  initialConfig?: Record<string, string>;
  /** Delay between a restart's reply and the node coming back; default Go's 2 + rand[0,splay) s. */
  restartDelayMs?: number;
  /** Delay before a shutdown action stops the node; default Go's rand[0,10) s. */
  shutdownDelayMs?: number;
  /** The collective the node is on in normal mode. Default `mcollective`. */
  mainCollective?: string;
  faults?: NodeFaults;
}

export interface NodeEnvironment {
  clock: Clock;
  /** The node's provisioning.jwt contents (undefined: no file configured), broken as `fault` says. */
  provisioningJwt(fault: ProvisioningJwtFault | undefined): Promise<string | undefined>;
  /** An RSA-2048 private key for gencsr. */
  rsaKey(): Promise<KeyObject>;
  publishLifecycle(event: LifecycleEvent): void;
  record(entry: RpcRecord): void;
  /** The node started or stopped answering provisioning subjects. */
  listeningChanged?(listening: boolean): void;
  random?: () => number;
}

/** What the node answers: the mcorpc reply body (or `pong`) for the reply envelope. */
export interface NodeReply {
  agent: string;
  action: string;
  payload: Uint8Array;
}

export interface NodeFiles {
  config: Record<string, string>;
  configText?: string;
  serverJwt?: string;
  serverSeedHex?: string;
  certificate?: string;
  ca?: string;
  privateKeyPem?: string;
  /** DER of the key configure decrypted (the bytes the provisioner encrypted). */
  privateKeyDer?: Uint8Array;
  csrPem?: string;
  ssldir?: string;
  actionPolicies?: Record<string, string>;
  opaPolicies?: Record<string, string>;
}

interface ActionResult {
  statuscode: number;
  statusmsg: string;
  data: unknown;
  after?: () => void;
}

/** Ends an action with an Aborted reply carrying `statusmsg`, as go-choria's agents abort. */
class Abort extends ProvisionerError {
  constructor(
    readonly statusmsg: string,
    readonly statuscode: number = STATUS.Aborted,
  ) {
    super(statusmsg);
  }
}


const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class SimulatedNode {
  readonly identity: string;
  readonly protocolVersion: ProtocolVersion;
  private options: NodeOptions;
  private faultSet: NodeFaults;
  private readonly configFile: string;
  private readonly configDir: string;
  private versionNow: string;
  private filesNow: NodeFiles;
  private running = true;
  private crashed = false;
  private provisioning: boolean;
  private lock: { holder: string; until: number } | undefined;
  private ecdhPrivate: Uint8Array | undefined;
  private allowRestart = true;
  private provisionChain: Promise<unknown> = Promise.resolve();
  private restartCount = 0;
  private provisionedCount = 0;
  private startupCount = 0;
  private readonly jwtRefusal: string | undefined;

  constructor(
    options: NodeOptions,
    private readonly env: NodeEnvironment,
  ) {
    this.options = options;
    this.identity = options.identity;
    this.protocolVersion = options.protocolVersion;
    this.faultSet = options.faults ?? {};
    this.configFile = options.configFile ?? DEFAULT_CONFIG_FILE;
    this.configDir = this.configFile.slice(0, this.configFile.lastIndexOf("/")) || "/";
    this.versionNow = options.version;
    this.filesNow = { config: { ...(options.initialConfig ?? {}) } };
    this.jwtRefusal = options.provisioningJwtRefused ?? (options.token === "" ? "no auth token" : undefined);
    this.provisioning = this.modeAtStart();
  }

  // ---- state for tests -------------------------------------------------------------------------

  get faults(): NodeFaults {
    return this.faultSet;
  }
  setFaults(faults: NodeFaults): void {
    this.faultSet = faults;
  }
  get version(): string {
    return this.versionNow;
  }
  get files(): Readonly<NodeFiles> {
    return this.filesNow;
  }
  get configuredConfig(): Record<string, string> | undefined {
    return this.filesNow.configText === undefined ? undefined : { ...this.filesNow.config };
  }
  get serverJwt(): string | undefined {
    return this.filesNow.serverJwt;
  }
  get privateKeyDer(): Uint8Array | undefined {
    return this.filesNow.privateKeyDer;
  }
  get restarts(): number {
    return this.restartCount;
  }
  get provisioned(): number {
    return this.provisionedCount;
  }
  get startups(): number {
    return this.startupCount;
  }
  get inProvisioningMode(): boolean {
    return this.running && this.provisioning;
  }
  /** Why the node's provisioning.jwt did not configure provisioning mode, if it did not. */
  get provisioningJwtRefused(): string | undefined {
    return this.jwtRefusal;
  }
  /** Answers requests on the provisioning subjects: running, not crashed, in provisioning mode. */
  get listening(): boolean {
    return this.running && !this.crashed && this.provisioning;
  }
  /** Answers reprovision on its main collective: running, not crashed, with provisioning settings, out of provisioning mode. */
  get inNormalMode(): boolean {
    return this.running && !this.crashed && !this.provisioning && this.jwtRefusal === undefined;
  }
  get mainCollective(): string {
    return this.options.mainCollective ?? "mcollective";
  }
  get isRunning(): boolean {
    return this.running;
  }
  get lockHolder(): string | undefined {
    return this.lock && this.lock.until > this.env.clock.now() ? this.lock.holder : undefined;
  }

  /** Announce the node (the server process starting). */
  start(): void {
    this.env.listeningChanged?.(this.listening);
    if (this.listening) this.announce("startup");
  }

  /** Stop the node for good (fleet shutdown); publishes nothing. */
  stop(): void {
    const was = this.listening;
    this.running = false;
    if (was) this.env.listeningChanged?.(false);
  }

  // ---- receive pipeline ------------------------------------------------------------------------

  /**
   * Runs a decoded request through the server pipeline after schema validation (§4.4 steps 5-8).
   * Resolves with the reply to publish, or undefined when the node stays silent; every outcome is
   * recorded.
   */
  async handle(request: IncomingRequest): Promise<NodeReply | undefined> {
    const receivedAt = this.env.clock.now();
    const caller = `${request.senderId}.${request.callerId}`;
    const base = { timeMs: receivedAt, identity: this.identity, caller, agent: request.agent, requestId: request.id };
    const drop = (action: string, reason: string): undefined => {
      this.env.record({ ...base, action, outcome: "dropped", reason });
      return undefined;
    };
    const peekAction = () => (request.agent === "discovery" ? "ping" : actionOf(request.payload));

    if (!this.listening) return drop(peekAction(), "node is not answering provisioning requests");
    if (request.version !== this.protocolVersion) {
      return drop(peekAction(), `protocol v${request.version} request on a protocol v${this.protocolVersion} server`);
    }
    if (!matchesFilter(request.filter, { identity: this.identity, agents: PROVISIONING_AGENTS, facts: this.options.facts })) {
      return drop(peekAction(), "filter does not match");
    }
    if (request.collective !== PROVISIONING_COLLECTIVE) return drop(peekAction(), `unknown collective ${request.collective}`);
    if (!withinTtl(request, receivedAt)) return drop(peekAction(), "request is outside its ttl");
    const timeoutMs = AGENT_TIMEOUT_MS[request.agent];
    if (timeoutMs === undefined) return drop(peekAction(), `unknown agent ${request.agent}`);

    let action: string;
    let payload: Uint8Array;
    let result: ActionResult | undefined;
    let executedAtMs = receivedAt;
    if (request.agent === "discovery") {
      action = "ping";
      if (!decoder.decode(request.payload).includes("ping")) return drop(action, "discovery payload is not ping");
      payload = encoder.encode("pong");
    } else {
      const dispatched = await this.dispatch(request, caller);
      executedAtMs = this.env.clock.now();
      action = dispatched.action;
      result = dispatched.result;
      const override = this.faultSet.status?.[action] ?? this.faultSet.status?.[`${request.agent}#${action}`];
      if (override) result = { ...override, data: {} };
      payload = encoder.encode(
        JSON.stringify({ action, statuscode: result.statuscode, statusmsg: result.statusmsg, data: result.data ?? {} }),
      );
    }

    const crash = this.faultSet.crash;
    const crashesNow = crash !== undefined && selects([crash.after], request.agent, action);
    if (crashesNow && crash.beforeReply) {
      this.crash(crash.restartAfterMs);
      return drop(action, "fault: crashed before replying");
    }

    // A slow handler still finishes its work; only its reply is lost past the agent timeout.
    result?.after?.();
    const delay = this.faultSet.delay;
    if (delay && selects(delay.on, request.agent, action)) {
      if (delay.ms >= timeoutMs) {
        await this.env.clock.sleep(timeoutMs);
        return drop(action, `agent timeout: handler took longer than ${timeoutMs} ms`);
      }
      await this.env.clock.sleep(delay.ms);
    }

    if (crashesNow) this.crash(crash.restartAfterMs);
    if (selectsIfSet(this.faultSet.silent, request.agent, action)) return drop(action, "fault: reply suppressed");

    this.env.record({ ...base, executedAtMs, action, outcome: result?.statuscode ?? STATUS.OK, statusmsg: result?.statusmsg ?? "OK" });
    return { agent: request.agent, action, payload };
  }

  /**
   * A request on the main collective in normal mode: only choria_provision#reprovision is modelled
   * (go-choria's reprovisionAction); everything else is dropped and recorded as such.
   */
  async handleNormal(request: IncomingRequest): Promise<NodeReply | undefined> {
    const receivedAt = this.env.clock.now();
    const caller = `${request.senderId}.${request.callerId}`;
    const base = { timeMs: receivedAt, identity: this.identity, caller, agent: request.agent, requestId: request.id };
    const action = request.agent === "choria_provision" ? actionOf(request.payload) : "";
    const drop = (reason: string): undefined => {
      this.env.record({ ...base, action, outcome: "dropped", reason });
      return undefined;
    };
    if (!this.inNormalMode) return drop("node is not in normal mode");
    if (request.version !== this.protocolVersion) return drop(`protocol v${request.version} request on a protocol v${this.protocolVersion} server`);
    if (request.collective !== this.mainCollective) return drop(`unknown collective ${request.collective}`);
    if (!withinTtl(request, receivedAt)) return drop("request is outside its ttl");
    if (request.agent !== "choria_provision" || action !== "reprovision") return drop("only choria_provision#reprovision is modelled in normal mode");

    let result: ActionResult;
    try {
      const body = JSON.parse(decoder.decode(request.payload)) as { data?: unknown };
      const args = this.parse("reprovision", body.data);
      this.checkToken(args.token);
      const override = this.faultSet.status?.reprovision ?? this.faultSet.status?.["choria_provision#reprovision"];
      if (override) throw new Abort(override.statusmsg, override.statuscode);
      // go-choria writes plugin.choria.server.provision=1 and loglevel=debug, then restarts after 2 + rand[0,10) s.
      this.filesNow.config = { ...this.filesNow.config, "plugin.choria.server.provision": "1", loglevel: "debug" };
      const splayMs = (Math.floor(this.random() * 10) + 2) * 1000;
      result = { ...ok({ message: `Restarting after ${goDuration(splayMs)}` }), after: () => this.scheduleRestart(this.options.restartDelayMs ?? splayMs) };
    } catch (error) {
      if (!(error instanceof Abort)) return drop(`could not process request: ${(error as Error).message}`);
      result = fail(error.statuscode, error.statusmsg);
    }
    result.after?.();
    this.env.record({ ...base, executedAtMs: receivedAt, action, outcome: result.statuscode, statusmsg: result.statusmsg });
    const payload = encoder.encode(JSON.stringify({ action, statuscode: result.statuscode, statusmsg: result.statusmsg, data: result.data ?? {} }));
    return { agent: request.agent, action, payload };
  }

  private async dispatch(request: IncomingRequest, caller: string): Promise<{ action: string; result: ActionResult }> {
    let body: unknown;
    try {
      body = JSON.parse(decoder.decode(request.payload));
    } catch (error) {
      return { action: "", result: fail(STATUS.InvalidData, `Could not process request: ${(error as Error).message}`) };
    }
    if (typeof body !== "object" || body === null || Array.isArray(body) || typeof (body as { action?: unknown }).action !== "string") {
      return { action: "", result: fail(STATUS.InvalidData, "Could not process request: the request has no action") };
    }
    const { action, data } = body as { action: string; data?: unknown };
    if (request.agent === "rpcutil") return { action, result: this.rpcutil(action) };
    if (request.agent !== "choria_provision") return { action, result: unknownAction(action, request.agent) };

    // The Go agent serialises its actions behind one mutex.
    const run = this.provisionChain.then(() => this.provision(action, data, request, caller));
    this.provisionChain = run.catch(() => undefined);
    return { action, result: await run };
  }

  private rpcutil(action: string): ActionResult {
    const now = this.env.clock.now();
    if (action === "inventory") {
      return ok({
        agents: [...PROVISIONING_AGENTS],
        classes: [],
        collectives: [PROVISIONING_COLLECTIVE],
        data_plugins: [],
        facts: this.options.facts,
        machines: [],
        main_collective: PROVISIONING_COLLECTIVE,
        version: this.faultSet.inventoryVersion ?? this.versionNow,
        upgradable: this.options.upgradable,
      });
    }
    if (action === "ping") return ok({ pong: Math.trunc(now / 1000) });
    return unknownAction(action, "rpcutil");
  }

  // ---- choria_provision ------------------------------------------------------------------------

  private async provision(action: string, data: unknown, request: IncomingRequest, caller: string): Promise<ActionResult> {
    const handler = this.actions[action];
    if (!handler) return unknownAction(action, "choria_provision");
    try {
      if (LOCKED_ACTIONS.has(action) && !this.takeLock(caller)) throw new Abort("Could not obtain provisioning lock");
      return await handler(data, request);
    } catch (error) {
      if (error instanceof Abort) return fail(error.statuscode, error.statusmsg);
      throw error;
    }
  }

  private takeLock(key: string): boolean {
    const now = this.env.clock.now();
    if (this.lock && this.lock.until > now && this.lock.holder !== key) return false;
    this.lock = { holder: key, until: now + LOCK_WINDOW_MS };
    return true;
  }

  private parse(action: string, data: unknown): ParsedData {
    try {
      return parseRequestData(data, REQUEST_SHAPES[action] as (typeof REQUEST_SHAPES)[string]);
    } catch (error) {
      if (!(error instanceof RequestDataError)) throw error;
      throw new Abort(`Could not parse request data for choria_provision#${action}: ${error.message}`, STATUS.InvalidData);
    }
  }

  private checkToken(token: unknown): void {
    if (this.options.token !== "" && token !== this.options.token) throw new Abort("Incorrect provision token supplied");
  }

  private readonly actions: Record<string, (data: unknown, request: IncomingRequest) => Promise<ActionResult> | ActionResult> = {
    jwt: async (data) => {
      const args = this.parse("jwt", data);
      this.checkToken(args.token);
      const fault = this.faultSet.provisioningJwt;
      const jwt = await this.env.provisioningJwt(fault);
      if (jwt === undefined) throw new Abort("No Provisioning JWT file has been configured");
      if (fault === "missing-file") throw new Abort("Provisioning JWT file does not exist");
      const pair = generateX25519KeyPair();
      this.ecdhPrivate = pair.privateKey;
      return ok({ jwt, ecdh_public: encodeHex(pair.publicKey) });
    },

    gen25519: (data) => {
      const args = this.parse("gen25519", data);
      this.checkToken(args.token);
      const nonce = typeof args.nonce === "string" ? args.nonce : "";
      const seed = generateEd25519Seed();
      delete this.filesNow.serverJwt;
      this.filesNow.serverSeedHex = encodeHex(seed);
      const signed = signNonce(seed, this.faultSet.badNonceSignature ? `${nonce}-tampered` : nonce);
      return ok({ public_key: signed.publicKeyHex, directory: this.configDir, signature: signed.signatureHex });
    },

    gencsr: async (data) => {
      const args = this.parse("gencsr", data);
      this.checkToken(args.token);
      const ssldir = this.filesNow.config["plugin.choria.ssldir"] || `${this.configDir}/ssl`;
      const privateKey = await this.env.rsaKey().catch((error: Error) => {
        throw new Abort(`Could not create private key: ${error.message}`);
      });
      const override = this.faultSet.csr;
      const csr = attempt("Could not create CSR", () => createCsr({
        commonName: override?.commonName ?? ((args.cn as string | undefined) || this.identity),
        privateKey,
        ...(override?.dnsNames ? { dnsNames: override.dnsNames } : {}),
        ...(args.C ? { country: args.C as string } : {}),
        ...(args.L ? { locality: args.L as string } : {}),
        ...(args.O ? { organization: args.O as string } : {}),
        ...(args.OU ? { organizationalUnit: args.OU as string } : {}),
      }));
      this.filesNow.ssldir = ssldir;
      this.filesNow.privateKeyPem = privateKey.export({ format: "pem", type: "pkcs1" }).toString();
      this.filesNow.csrPem = csr;
      return ok({ csr, public_key: rsaPublicKeyPkcs1Pem(privateKey), ssldir });
    },

    configure: (data, request) => {
      const args = this.parse("configure", data);
      this.checkToken(args.token);
      const text = (name: string) => (typeof args[name] === "string" ? (args[name] as string) : "");
      if (text("config") === "") {
        throw new Abort("Did not receive any configuration to write, cannot write a empty configuration file");
      }
      if (text("key") !== "" && text("ecdh_public") === "") {
        throw new Abort("EDCH Public Key not supplied while providing a private key");
      }
      const settings = decodeSettings(text("config"));

      if (text("certificate") !== "" && text("ssldir") !== "" && text("ca") !== "") {
        this.filesNow.ssldir = text("ssldir");
        this.filesNow.certificate = text("certificate");
        this.filesNow.ca = text("ca");
        if (text("key") !== "") {
          let der: Uint8Array;
          try {
            der = this.decryptPrivateKey(text("key"), text("ecdh_public"));
          } catch (error) {
            throw new Abort(`TLS Setup Failed: could not decrypt private key: ${(error as Error).message}`);
          }
          this.filesNow.privateKeyDer = der;
          this.filesNow.privateKeyPem = pem("RSA PRIVATE KEY", der);
          delete this.filesNow.csrPem;
        }
      }
      if (text("server_jwt") !== "") this.filesNow.serverJwt = text("server_jwt");

      // Written to a temporary file and loaded with config.NewConfig before it replaces server.conf;
      // from now on the node knows its config only as that file reads back.
      let written: ReturnType<typeof writeServerConfig>;
      try {
        written = writeServerConfig(
          settings,
          `configuration file written in request ${request.id} from ${request.callerId} (${request.senderId}) at ${new Date(this.env.clock.now()).toISOString()}`,
        );
      } catch (error) {
        if (!(error instanceof ServerConfigParseError)) throw error;
        throw new Abort(`Could not write config: generated configuration could not be parsed: ${error.message}`);
      }
      this.filesNow.config = written.settings;
      this.filesNow.configText = written.text;
      const lines = Object.keys(settings).length + 1;

      const actionPolicies = (args.action_policies ?? {}) as Record<string, string>;
      const badPolicy = Object.keys(actionPolicies).find((name) => !name.endsWith(".policy"));
      if (badPolicy !== undefined) {
        throw new Abort(`Could not save Action Policies: expected ${JSON.stringify(badPolicy)} to have .policy extension`);
      }
      if (Object.keys(actionPolicies).length > 0) this.filesNow.actionPolicies = nonEmpty(actionPolicies);
      const opaPolicies = (args.opa_policies ?? {}) as Record<string, string>;
      const badRego = Object.keys(opaPolicies).find((name) => !name.endsWith(".rego"));
      if (badRego !== undefined) {
        throw new Abort(`Could not save Open Policy Agent Policies: expected ${JSON.stringify(badRego)} to have .rego extension`);
      }
      if (Object.keys(opaPolicies).length > 0) this.filesNow.opaPolicies = nonEmpty(opaPolicies);

      this.provisionedCount += 1;
      this.announce("provisioned");
      return ok({ message: `Wrote ${lines} lines to ${this.configFile}` });
    },

    restart: (data) => {
      const args = this.parse("restart", data);
      this.checkToken(args.token);
      // Go re-parses the config file here (config.NewConfig) and reads Choria.Provision from it.
      if (goConfigBool(this.filesNow.config["plugin.choria.server.provision"] ?? "")) {
        throw new Abort(`Configuration ${this.configFile} enables provisioning, restart cannot continue`);
      }
      const splay = typeof args.splay === "number" && args.splay !== 0 ? args.splay : 10;
      const splayMs = (Math.floor(this.random() * Math.max(splay, 1)) + 2) * 1000;
      return {
        ...ok({ message: `Restarting Choria Server after ${goDuration(splayMs)}` }),
        after: () => this.scheduleRestart(this.options.restartDelayMs ?? splayMs),
      };
    },

    shutdown: (data) => {
      const args = this.parse("shutdown", data);
      this.checkToken(args.token);
      const delayMs = this.options.shutdownDelayMs ?? Math.floor(this.random() * 10) * 1000;
      return {
        ...ok({ message: `Shutting Choria Server down after ${goDuration(delayMs)}` }),
        after: () => this.scheduleShutdown(delayMs),
      };
    },

    reprovision: () => {
      throw new Abort("Server is already in provisioning mode, cannot enable provisioning mode again");
    },

    release_update: (data) => {
      if (!this.options.upgradable) throw new Abort("Version updates is not enabled in the configuration");
      const args = this.parse("release_update", data);
      this.checkToken(args.token);
      const target = typeof args.version === "string" ? args.version : "";
      const failure = this.faultSet.updateFailure;
      if (failure) {
        throw new Abort(
          failure.rollbackFailed
            ? `Update to version ${target} failed, rollback also failed, server in broken state: ${failure.message}`
            : `Update to version ${target} failed, release rolled back: ${failure.message}`,
        );
      }
      this.announce("upgraded", target);
      this.versionNow = target;
      return {
        ...ok({ message: "Restarting Choria Server after 2s" }),
        after: () => this.scheduleRestart(this.options.restartDelayMs ?? 2000),
      };
    },
  };

  private decryptPrivateKey(key: string, ecdhPublic: string): Uint8Array {
    const peer = goHexDecode(ecdhPublic);
    if (!this.ecdhPrivate) throw new Error("private key not set");
    if (peer.length !== 32) throw new Error(`bad point length: ${peer.length}, expected 32`);
    const secret = x25519SharedSecret(this.ecdhPrivate, peer);
    if (!/-----BEGIN [^-]+-----/.test(key)) throw new Error("bad key received");
    if (!key.includes("Proc-Type: 4,ENCRYPTED")) throw new Error("key is not encrypted");
    return decryptLegacyPem(key, secret);
  }

  // ---- life cycle ------------------------------------------------------------------------------

  private random(): number {
    return (this.env.random ?? Math.random)();
  }

  /**
   * go-choria `Framework.ProvisionMode`: only with provisioning settings from the JWT; then the
   * config's `plugin.choria.server.provision` if the file sets it (Go's bool parsing), else `chpd`.
   */
  private provisioningEnabled(config: Record<string, string>): boolean {
    if (this.jwtRefusal !== undefined) return false;
    const setting = config["plugin.choria.server.provision"];
    return setting === undefined ? this.options.provisionDefault : goConfigBool(setting);
  }

  /**
   * go-choria `server run` at start: with `plugin.security.provider=choria` the configured token
   * and seed files must exist, match and be unexpired, or the server deletes them and starts from
   * the provisioning defaults (`chpd` decides); otherwise `provisioningEnabled`.
   */
  private modeAtStart(): boolean {
    if (this.jwtRefusal !== undefined) return false;
    const config = this.filesNow.config;
    if (config["plugin.security.provider"] === "choria" && !this.serverCredentialsValid(config)) {
      delete this.filesNow.serverJwt;
      delete this.filesNow.serverSeedHex;
      return this.options.provisionDefault;
    }
    return this.provisioningEnabled(config);
  }

  /** `shouldProvisionTokenAndSeed` inverted: gen25519 wrote <dir>/server.seed, configure <dir>/server.jwt. */
  private serverCredentialsValid(config: Record<string, string>): boolean {
    const { serverJwt, serverSeedHex } = this.filesNow;
    if (serverSeedHex === undefined || config["plugin.security.choria.seed_file"] !== `${this.configDir}/server.seed`) return false;
    if (serverJwt === undefined || config["plugin.security.choria.token_file"] !== `${this.configDir}/server.jwt`) return false;
    let claims: Record<string, unknown>;
    try {
      claims = decodeJwt(serverJwt).claims;
    } catch {
      return false;
    }
    if (claims.purpose !== "choria_server" || typeof claims.public_key !== "string") return false;
    if (claims.public_key.toLowerCase() !== ed25519PublicKeyHex(serverSeedHex)) return false;
    // StandardClaims.ExpireTime: the earlier of exp and issexp; neither set counts as expired.
    const expiries = [claims.exp, claims.issexp].filter((value): value is number => typeof value === "number");
    return expiries.length > 0 && this.env.clock.now() <= Math.min(...expiries) * 1000;
  }

  private announce(type: LifecycleType, newVersion?: string): void {
    if (type === "startup") this.startupCount += 1;
    this.env.publishLifecycle(
      buildLifecycleEvent({
        type,
        identity: this.identity,
        component: PROVISION_MODE_COMPONENT,
        version: this.versionNow,
        ...(newVersion === undefined ? {} : { newVersion }),
        timestampMs: this.env.clock.now(),
      }),
    );
  }

  private scheduleRestart(delayMs: number): void {
    if (!this.allowRestart) return;
    this.allowRestart = false;
    this.announce("shutdown");
    void this.env.clock.sleep(delayMs).then(() => {
      if (!this.running || this.crashed) return;
      this.comeBack();
    });
  }

  /** The re-exec'd process: fresh memory, same files, mode re-read from the config. */
  private comeBack(): void {
    const wasListening = this.listening;
    this.crashed = false;
    this.restartCount += 1;
    this.lock = undefined;
    this.ecdhPrivate = undefined;
    this.allowRestart = true;
    this.provisionChain = Promise.resolve();
    this.provisioning = this.modeAtStart();
    if (wasListening !== this.listening) this.env.listeningChanged?.(this.listening);
    if (this.listening) this.announce("startup");
  }

  private scheduleShutdown(delayMs: number): void {
    if (!this.allowRestart) return;
    this.allowRestart = false;
    void this.env.clock.sleep(delayMs).then(() => {
      if (!this.running) return;
      this.announce("shutdown");
      this.stop();
    });
  }

  private crash(restartAfterMs: number | undefined): void {
    const wasListening = this.listening;
    this.crashed = true;
    if (wasListening) this.env.listeningChanged?.(false);
    if (restartAfterMs === undefined) return;
    void this.env.clock.sleep(restartAfterMs).then(() => {
      if (!this.running) return;
      // Writes since the last start were lost with the crash; the one-shot fault is spent.
      this.filesNow = { config: { ...(this.options.initialConfig ?? {}) } };
      this.faultSet = { ...this.faultSet, crash: undefined };
      this.comeBack();
    });
  }
}

const LOCKED_ACTIONS = new Set(["configure", "gen25519", "gencsr", "jwt", "release_update"]);

/** Runs a step whose failure aborts the action with `<prefix>: <reason>`, as the Go agent words it. */
function attempt<T>(prefix: string, step: () => T): T {
  try {
    return step();
  } catch (error) {
    throw new Abort(`${prefix}: ${(error as Error).message}`);
  }
}

function ok(data: unknown): ActionResult {
  return { statuscode: STATUS.OK, statusmsg: "OK", data };
}

function fail(statuscode: number, statusmsg: string): ActionResult {
  return { statuscode, statusmsg, data: {} };
}

function unknownAction(action: string, agent: string): ActionResult {
  return fail(STATUS.UnknownAction, `Unknown action ${action} for agent ${agent}`);
}

function actionOf(payload: Uint8Array): string {
  try {
    const body = JSON.parse(decoder.decode(payload)) as { action?: unknown };
    return typeof body.action === "string" ? body.action : "";
  } catch {
    return "";
  }
}

function decodeSettings(config: string): Record<string, string> {
  let value: unknown;
  try {
    value = JSON.parse(config);
  } catch (error) {
    throw new Abort(`Could not decode configuration data: ${(error as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Abort(`Could not decode configuration data: json: cannot unmarshal ${Array.isArray(value) ? "array" : typeof value} into Go value of type map[string]string`);
  }
  const settings: Record<string, string> = {};
  for (const [key, entry] of Object.entries(value as Record<string, unknown>)) {
    if (typeof entry !== "string") {
      throw new Abort(`Could not decode configuration data: json: cannot unmarshal ${typeof entry} into Go value of type string`);
    }
    settings[key] = entry;
  }
  return settings;
}

/** Go's hex.DecodeString, with its error texts. */
function goHexDecode(text: string): Uint8Array {
  const bad = /[^0-9a-fA-F]/.exec(text);
  if (bad) {
    const code = bad[0].codePointAt(0) ?? 0;
    throw new Error(`encoding/hex: invalid byte: U+${code.toString(16).toUpperCase().padStart(4, "0")} ${JSON.stringify(bad[0]).replace(/^"|"$/g, "'")}`);
  }
  if (text.length % 2 !== 0) throw new Error("encoding/hex: odd length hex string");
  return decodeHex(text);
}

function ed25519PublicKeyHex(seedHex: string): string | undefined {
  try {
    const key = ed25519SigningKey(decodeHex(seedHex));
    return key.alg === "EdDSA" ? key.publicKeyHex : undefined;
  } catch {
    return undefined;
  }
}

function nonEmpty(policies: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(policies).filter(([name, text]) => name !== "" && text !== ""));
}

function pem(label: string, der: Uint8Array): string {
  const body = Buffer.from(der).toString("base64").match(/.{1,64}/g)?.join("\n") ?? "";
  return `-----BEGIN ${label}-----\n${body}\n-----END ${label}-----\n`;
}
