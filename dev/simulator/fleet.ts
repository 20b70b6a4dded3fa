/**
 * A fleet of simulated provisioning-mode Choria Servers on a real NATS server, for tests, the local
 * run and benchmarks. Nodes share a small pool of connections (one per `nodesPerConnection`); each
 * connection holds one subscription per broadcast agent subject and fans a broadcast out to its
 * nodes in-process, while every node keeps its own `provisioning.node.<identity>` subscription and
 * replies with its own identity, as separate servers would.
 */
import { createHmac } from "node:crypto";
import { connect, type NatsConnection, type Subscription, type TlsOptions } from "nats";
import { encodeLifecycleEvent, type LifecycleEvent, type LifecycleFormat, lifecycleSubject } from "../../lib/choria/lifecycle";
import { broadcastSubject, nodeSubject } from "../../lib/choria/protocol";
import { decodeRequest, type IncomingRequest } from "../../test/support/choria-node/protocol";
import type { ProtocolVersion } from "../../lib/choria/envelope";
import { ed25519SigningKey, generateEd25519Seed } from "../../test/support/choria-node/keys";
import { encodeBase64Url } from "../../lib/crypto/encoding";
import { ksuid } from "../../lib/crypto/ids";
import { mintProvisioningJwt } from "../../test/support/choria-node/server-jwt";
import type { SigningKey } from "../../lib/crypto/keys";
import { type Clock, systemClock } from "../../lib/ports/clock";
import type { NodeFaults, ProvisioningJwtFault } from "./faults";
import { type NodeEnvironment, type NodeOptions, PROVISIONING_AGENTS, PROVISIONING_COLLECTIVE, type RpcRecord, SimulatedNode } from "./node";
import { type ProvisioningJwtReading, readProvisioningJwtFile } from "./provisioning-jwt";
import { RsaKeyPool, type RsaKeyPoolOptions } from "./rsa-pool";
import { encodeNodeReplies } from "./wire";

export interface FleetOptions {
  natsUrl: string;
  /** Number of nodes named `<identityPrefix><n>.<domain>` (n from 1); ignored when `identities` is given. */
  count?: number;
  identities?: string[];
  identityPrefix?: string;
  domain?: string;
  protocolVersion?: ProtocolVersion;
  /**
   * The provisioning token (`cht`) of the nodes' provisioning.jwt. Required: with "" the nodes never
   * enter provisioning mode, as a go-choria server ignores a provisioning JWT without a token.
   */
  token: string;
  /**
   * Dial the broker as real provisioning-mode nodes do: TLS with certificate verification off (the
   * broker must offer TLS, or connecting fails). Nodes present their provisioning.jwt as the NATS
   * token either way. Default false (plain NATS).
   */
  tls?: boolean;
  /** Bytes after the token in provisioning.jwt (config management often adds "\n"); sent as is. */
  jwtFileSuffix?: string;
  /** Key that signs the nodes' provisioning JWT; default a fresh Ed25519 key (see `fleet.signer`). */
  provisioningSigner?: SigningKey;
  /**
   * Claims merged over the ones `choria jwt prov` writes (cht, chs, chu, chpd, extensions, ou, v2,
   * update, purpose, iss, sub, exp, nbf, iat, jti); an `undefined` value removes a claim.
   */
  jwtClaims?: Record<string, unknown>;
  /** Server version reported by inventory and lifecycle events. Default "0.30.0". */
  version?: string;
  /** allow_update: release_update permitted, inventory `upgradable`. Default false. */
  upgradable?: boolean;
  facts?: Record<string, unknown> | ((identity: string) => Record<string, unknown>);
  /** Lifecycle event format; servers default to CloudEvents. */
  lifecycleFormat?: LifecycleFormat;
  /** Delay before a restarted node comes back; default Go's 2 s (+ splay). */
  restartDelayMs?: number;
  /** Delay before the shutdown action stops a node; default Go's rand[0,10) s. */
  shutdownDelayMs?: number;
  clock?: Clock;
  faults?: Record<string, NodeFaults>;
  /** Nodes sharing one NATS connection. Default 250. */
  nodesPerConnection?: number;
  rsaKeys?: RsaKeyPoolOptions;
  /** Record discovery pings too (every node, every discovery). Default true. */
  recordDiscovery?: boolean;
  /** The collective nodes answer reprovision on in normal mode (same NATS server). Default `mcollective`. */
  mainCollective?: string;
  /** Config every node starts with; `plugin.choria.server.provision: "false"` starts it provisioned, in normal mode. */
  initialConfig?: Record<string, string>;
}

interface PublishedLifecycleEvent {
  subject: string;
  event: LifecycleEvent;
}

export interface Fleet {
  readonly identities: readonly string[];
  /** The node's state and fault controls; throws for an unknown identity. */
  node(identity: string): SimulatedNode;
  /** Every request the nodes received, in arrival order. */
  readonly record: RpcRecord[];
  /** Every lifecycle event the nodes published, in order. */
  readonly lifecycleEvents: PublishedLifecycleEvent[];
  /** The nodes' provisioning.jwt file, byte for byte (what an unfaulted `jwt` action returns). */
  readonly provisioningJwt: string;
  /** Why that file puts no node into provisioning mode (go-choria's reason), if it does not. */
  readonly provisioningJwtRefused: string | undefined;
  /** The key that signed it. */
  readonly signer: SigningKey;
  addNodes(count: number, faults?: Record<string, NodeFaults>): Promise<string[]>;
  waitFor(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const BROADCAST_AGENTS = PROVISIONING_AGENTS;
const YEAR_SECONDS = 365 * 24 * 3600;

interface Link {
  nc: NatsConnection;
  nodes: Map<string, SimulatedNode>;
  nodeSubscriptions: Map<string, Subscription>;
  /** Normal-mode nodes' `<main collective>.node.<identity>` subscriptions. */
  mainSubscriptions: Map<string, Subscription>;
}

/** Starts the fleet; resolves once every node is subscribed and has announced itself. */
export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const clock = options.clock ?? systemClock;
  const signer = options.provisioningSigner ?? ed25519SigningKey(generateEd25519Seed());
  const rsaPool = new RsaKeyPool(options.rsaKeys);
  const jwts = await mintProvisioningJwts(options, signer, clock);
  const pool = new NodePool(options, clock, jwts, rsaPool);
  try {
    await pool.add(options.identities ?? pool.numberedNames(options.count ?? 1), options.faults);
  } catch (error) {
    await pool.close();
    throw error;
  }

  return {
    identities: pool.identities,
    record: pool.record,
    lifecycleEvents: pool.lifecycleEvents,
    provisioningJwt: jwts.file,
    provisioningJwtRefused: jwts.boot.ok ? undefined : jwts.boot.reason,
    signer,
    node: (identity) => pool.node(identity),
    addNodes: (count, faults) => pool.add(pool.numberedNames(count), faults),
    waitFor: waitUntil,
    stop: () => pool.stop(),
  };
}

async function waitUntil(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`fleet condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The nodes' provisioning.jwt file, what a node makes of it, and the broken variants a node's fault asks for. */
interface ProvisioningJwts {
  file: string;
  /** The node reads the file at start: it decides whether there is a provisioning mode at all. */
  boot: ProvisioningJwtReading;
  jwtFor(fault: ProvisioningJwtFault | undefined): Promise<string>;
}

async function mintProvisioningJwts(options: FleetOptions, signer: SigningKey, clock: Clock): Promise<ProvisioningJwts> {
  const nowSeconds = Math.trunc(clock.now() / 1000);
  const claims = provisioningClaims(options, nowSeconds);
  const file = `${await mintProvisioningJwt(claims, signer)}${options.jwtFileSuffix ?? ""}`;
  // Each broken variant is minted once, when a node first asks for it.
  const faultyJwts = new Map<ProvisioningJwtFault, Promise<string>>();
  const jwtFor = (fault: ProvisioningJwtFault | undefined): Promise<string> => {
    if (fault === undefined || fault === "missing-file") return Promise.resolve(file);
    let jwt = faultyJwts.get(fault);
    if (!jwt) {
      jwt = mintFaultyJwt(fault, claims, signer, nowSeconds);
      faultyJwts.set(fault, jwt);
    }
    return jwt;
  };
  return { file, boot: readProvisioningJwtFile(file), jwtFor };
}

/** What `choria jwt prov --token T --urls U --default [--protocol-v2] [--upgrade]` writes, with `jwtClaims` over it. */
function provisioningClaims(options: FleetOptions, nowSeconds: number): Record<string, unknown> {
  return {
    cht: options.token,
    chs: false,
    chu: options.natsUrl,
    chpd: true,
    extensions: null,
    ou: "choria",
    ...((options.protocolVersion ?? 1) === 2 ? { v2: true } : {}),
    ...(options.upgradable ? { update: true } : {}),
    purpose: "choria_provisioning",
    iss: "Choria Tokens Package",
    sub: "choria_provisioning",
    exp: nowSeconds + YEAR_SECONDS,
    nbf: nowSeconds,
    iat: nowSeconds,
    jti: ksuid(new Date(nowSeconds * 1000)),
    ...options.jwtClaims,
  };
}

/** The fleet's nodes on their shared connections, and what they recorded and published. */
class NodePool {
  readonly record: RpcRecord[] = [];
  readonly lifecycleEvents: PublishedLifecycleEvent[] = [];
  readonly identities: string[] = [];
  private readonly links: Link[] = [];
  private readonly nodes = new Map<string, { node: SimulatedNode; link: Link }>();
  private readonly perConnection: number;
  private readonly format: LifecycleFormat;
  private readonly recordDiscovery: boolean;
  private numbered = 0;
  private stopped = false;

  constructor(
    private readonly options: FleetOptions,
    private readonly clock: Clock,
    private readonly jwts: ProvisioningJwts,
    private readonly rsaPool: RsaKeyPool,
  ) {
    this.perConnection = Math.max(1, options.nodesPerConnection ?? 250);
    this.format = options.lifecycleFormat ?? "cloudevents";
    this.recordDiscovery = options.recordDiscovery ?? true;
  }

  node(identity: string): SimulatedNode {
    const entry = this.nodes.get(identity);
    if (!entry) throw new Error(`the fleet has no node ${identity}`);
    return entry.node;
  }

  numberedNames(count: number): string[] {
    const prefix = this.options.identityPrefix ?? "node";
    const domain = this.options.domain ?? "example.net";
    return Array.from({ length: count }, () => `${prefix}${++this.numbered}.${domain}`);
  }

  async add(names: string[], faults: Record<string, NodeFaults> = {}): Promise<string[]> {
    const touched = new Set<Link>();
    for (const identity of names) {
      if (this.nodes.has(identity)) throw new Error(`the fleet already has a node ${identity}`);
      let link = this.links[this.links.length - 1];
      if (!link || link.nodes.size >= this.perConnection) link = await this.newLink();
      const node = new SimulatedNode(this.nodeOptions(identity, faults[identity]), this.environment(link, identity));
      link.nodes.set(identity, node);
      this.nodes.set(identity, { node, link });
      this.identities.push(identity);
      touched.add(link);
      node.start();
    }
    await Promise.all([...touched].map((link) => link.nc.flush()));
    return names;
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    for (const { node } of this.nodes.values()) node.stop();
    this.stopped = true;
    await Promise.all(this.links.map((link) => link.nc.drain().catch(() => link.nc.close())));
  }

  /** Closes every connection at once (a fleet that failed to start). */
  async close(): Promise<void> {
    await Promise.all(this.links.map((link) => link.nc.close()));
  }

  private nodeOptions(identity: string, faults: NodeFaults | undefined): NodeOptions {
    const { options } = this;
    const boot = this.jwts.boot;
    return {
      identity,
      version: options.version ?? "0.30.0",
      ...(boot.ok
        ? {
            protocolVersion: boot.settings.protocolVersion,
            token: boot.settings.token,
            provisionDefault: boot.settings.provisionDefault,
            upgradable: options.upgradable === true || boot.settings.allowUpdate,
          }
        : { protocolVersion: options.protocolVersion ?? 1, token: "", provisionDefault: false, upgradable: false, provisioningJwtRefused: boot.reason }),
      facts: typeof options.facts === "function" ? options.facts(identity) : (options.facts ?? {}),
      ...(options.restartDelayMs === undefined ? {} : { restartDelayMs: options.restartDelayMs }),
      ...(options.shutdownDelayMs === undefined ? {} : { shutdownDelayMs: options.shutdownDelayMs }),
      ...(options.mainCollective === undefined ? {} : { mainCollective: options.mainCollective }),
      ...(options.initialConfig === undefined ? {} : { initialConfig: options.initialConfig }),
      ...(faults ? { faults } : {}),
    };
  }

  private environment(link: Link, identity: string): NodeEnvironment {
    return {
      clock: this.clock,
      provisioningJwt: this.jwts.jwtFor,
      rsaKey: () => this.rsaPool.take(),
      publishLifecycle: (event: LifecycleEvent) => {
        const subject = lifecycleSubject(event.type, event.component);
        this.lifecycleEvents.push({ subject, event });
        if (!this.stopped && !link.nc.isClosed()) link.nc.publish(subject, encodeLifecycleEvent(event, this.format));
      },
      record: (entry: RpcRecord) => {
        if (this.recordDiscovery || entry.agent !== "discovery") this.record.push(entry);
      },
      listeningChanged: (listening: boolean) => {
        this.syncMainSubscription(link, identity);
        this.syncNodeSubscription(link, identity, listening);
      },
    };
  }

  private async newLink(): Promise<Link> {
    const nc = await connect({
      servers: this.options.natsUrl,
      name: `choria-fleet-${this.links.length}`,
      maxReconnectAttempts: -1,
      // go-choria in provisioning mode: nats.Token(<provisioning.jwt>) and anonymous TLS.
      token: this.jwts.file,
      ...(this.options.tls ? { tls: { rejectUnauthorized: false } as TlsOptions } : {}),
    });
    const link: Link = { nc, nodes: new Map(), nodeSubscriptions: new Map(), mainSubscriptions: new Map() };
    for (const agent of BROADCAST_AGENTS) {
      nc.subscribe(broadcastSubject(PROVISIONING_COLLECTIVE, agent), {
        callback: (_error, message) => this.fanOut(link, message.data),
      });
    }
    this.links.push(link);
    return link;
  }

  /** A listening node has its own `provisioning.node.<identity>` subscription. */
  private syncNodeSubscription(link: Link, identity: string, listening: boolean): void {
    const existing = link.nodeSubscriptions.get(identity);
    if (listening && !existing && !this.stopped) {
      const subscription = link.nc.subscribe(nodeSubject(PROVISIONING_COLLECTIVE, identity), {
        callback: (_error, message) => {
          const node = link.nodes.get(identity);
          if (!node?.listening) return;
          const request = this.decode(message.data, [identity]);
          if (request) void this.answer(link, node, request);
        },
      });
      link.nodeSubscriptions.set(identity, subscription);
    } else if (!listening && existing) {
      existing.unsubscribe();
      link.nodeSubscriptions.delete(identity);
    }
  }

  /** A node out of provisioning mode is on its main collective, where renewal reaches it. */
  private syncMainSubscription(link: Link, identity: string): void {
    const node = link.nodes.get(identity);
    const existing = link.mainSubscriptions.get(identity);
    const wanted = !this.stopped && node !== undefined && node.inNormalMode;
    if (wanted && !existing && node) {
      const subscription = link.nc.subscribe(nodeSubject(node.mainCollective, identity), {
        callback: (_error, message) => {
          const current = link.nodes.get(identity);
          if (!current?.inNormalMode) return;
          const request = this.decode(message.data, [identity]);
          if (request) void this.answer(link, current, request, true);
        },
      });
      link.mainSubscriptions.set(identity, subscription);
    } else if (!wanted && existing) {
      existing.unsubscribe();
      link.mainSubscriptions.delete(identity);
    }
  }

  private fanOut(link: Link, data: Uint8Array): void {
    const listening = [...link.nodes.values()].filter((node) => node.listening);
    const request = this.decode(
      data,
      listening.map((node) => node.identity),
    );
    if (!request) return;
    for (const node of listening) void this.answer(link, node, request);
  }

  private decode(data: Uint8Array, identities: Iterable<string>): IncomingRequest | undefined {
    try {
      return decodeRequest(data);
    } catch (error) {
      for (const identity of identities) this.recordUnanswered(identity, error);
      return undefined;
    }
  }

  private async answer(link: Link, node: SimulatedNode, request: IncomingRequest, normalMode = false): Promise<void> {
    let reply: Awaited<ReturnType<SimulatedNode["handle"]>>;
    try {
      reply = await (normalMode ? node.handleNormal(request) : node.handle(request));
    } catch (error) {
      // A simulator bug must not take the fleet down; a real server would log and not answer.
      this.recordUnanswered(node.identity, error);
      return;
    }
    if (!reply || this.stopped || link.nc.isClosed()) return;
    if (request.replyTo === "") return;
    const messages = encodeNodeReplies(
      reply,
      { identity: node.identity, version: request.version, requestId: request.id, nowMs: this.clock.now() },
      node.faults,
    );
    for (const message of messages) {
      try {
        link.nc.publish(request.replyTo, message);
      } catch {
        // Larger than the server's max_payload: a real node's publish fails the same way.
      }
    }
  }

  private recordUnanswered(identity: string, error: unknown): void {
    this.record.push({
      timeMs: this.clock.now(),
      identity,
      caller: "",
      agent: "",
      action: "",
      requestId: "",
      outcome: "dropped",
      reason: error instanceof Error ? error.message : String(error),
    });
  }
}

async function mintFaultyJwt(
  fault: Exclude<ProvisioningJwtFault, "missing-file">,
  claims: Record<string, unknown>,
  signer: SigningKey,
  nowSeconds: number,
): Promise<string> {
  switch (fault) {
    case "expired":
      return mintProvisioningJwt({ ...claims, iat: nowSeconds - 7200, nbf: nowSeconds - 7200, exp: nowSeconds - 3600 }, signer);
    case "foreign":
      return mintProvisioningJwt(claims, ed25519SigningKey(generateEd25519Seed()));
    case "not-provisioning": {
      const { purpose: _purpose, sub: _sub, ...rest } = claims;
      return mintProvisioningJwt(rest, signer);
    }
    case "hs256": {
      const header = encodeBase64Url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
      const payload = encodeBase64Url(JSON.stringify(claims));
      const signature = createHmac("sha256", "not-a-choria-key").update(`${header}.${payload}`).digest();
      return `${header}.${payload}.${encodeBase64Url(signature)}`;
    }
    case "garbage":
      return "this is not a JWT";
  }
}
