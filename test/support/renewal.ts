/**
 * A renewal world over in-memory ports: the real admission registry on a MemoryAdmissionStore with
 * provisioned hosts, the renewal use case on a MemoryRenewalStore, a virtual clock, a gate that
 * leads with one term until the test closes it, and a fleet of fake nodes that answer
 * `choria_provision#reprovision` and record, node side, every request they ran and when they were
 * out of service.
 */
import { MemoryAdmissionStore } from "./stores/memory-admission-store";
import { AdmissionRegistry } from "../../lib/admission/registry";
import type { CredentialsExpiry } from "../../lib/ports/credentials";
import { Renewal, type RenewalDeps } from "../../lib/app/renewal";
import { MemoryRenewalStore } from "./stores/memory-renewal-store";
import type { Standing } from "../../lib/ports/lease-gate";
import type { RpcCall } from "../../lib/ports/rpc";
import { FakeGate, FakeRpc, RecordingLogger, RecordingMetrics, statusError, VirtualClock } from "./fakes";

export const SITE = "lab";
export const TOKEN = "renewal-test-token";
export const TERM = 4;
const INTERVAL_MS = 60_000;
export const MINUTE_MS = 60_000;
export const HOUR_MS = 60 * MINUTE_MS;

/** What one node saw: each reprovision it ran (node clock) and when it was provisioned again. */
interface NodeRecord {
  reprovisionedAt: number[];
  backAt: number[];
}

export interface RenewalWorld {
  clock: VirtualClock;
  registry: AdmissionRegistry;
  store: MemoryRenewalStore;
  renewal: Renewal;
  gate: FakeGate & { standing(): Promise<Standing> };
  rpc: FakeRpc;
  logger: RecordingLogger;
  metrics: RecordingMetrics;
  nodes: Map<string, NodeRecord>;
  /** Nodes that refuse reprovision, and with which status message. */
  refusing: Map<string, string>;
  /** Nodes that accept reprovision and never come back. */
  lost: Set<string>;
  /** How long a node that accepted reprovision takes to be provisioned again. */
  comebackMs: number;
  settings: RenewalDeps["settings"];
  /** Provisions `identity` with credentials of `lifetimeMs` that expire at `expiresAt`. */
  provision(identity: string, expiresAt: number, lifetimeMs?: number): Promise<void>;
  /** Advances the clock, provisioning again every node whose comeback is due. */
  advance(ms: number): Promise<void>;
  run(): ReturnType<Renewal["run"]>;
}

export function renewalSettings(overrides: Partial<RenewalDeps["settings"]> = {}): RenewalDeps["settings"] {
  return {
    site: SITE,
    enabled: true,
    before: { ms: 6 * HOUR_MS },
    ratePerMinute: 100,
    maxInFlight: 500,
    timeoutMs: 15 * MINUTE_MS,
    unansweredHoldMs: 3 * MINUTE_MS,
    failureThreshold: 5,
    failureWindow: 20,
    token: TOKEN,
    deadlineMarginMs: 5_000,
    ...overrides,
  };
}

export function renewalWorld(overrides: Partial<RenewalDeps["settings"]> = {}): RenewalWorld {
  const clock = new VirtualClock(Date.UTC(2026, 5, 1));
  const metrics = new RecordingMetrics();
  const logger = new RecordingLogger();
  const registry = new AdmissionRegistry({ site: SITE, intervalMs: INTERVAL_MS }, { store: new MemoryAdmissionStore(), metrics, clock, logger });
  const store = new MemoryRenewalStore();
  const gate = Object.assign(new FakeGate(clock), {
    async standing(this: FakeGate): Promise<Standing> {
      return this.closeWhen() ? { kind: "standby", current: undefined } : { kind: "leading", term: TERM };
    },
  });
  const rpc = new FakeRpc();
  const settings = renewalSettings(overrides);
  const nodes = new Map<string, NodeRecord>();
  const lifetimes = new Map<string, number>();
  const comebacks: Array<{ identity: string; at: number }> = [];

  const provision = async (identity: string, expiresAt: number, lifetimeMs = expiresAt - clock.now()) => {
    const work = await registry.admit(identity, "discovery", TERM);
    if (!work) throw new Error(`${identity} could not be admitted`);
    const begun = await registry.begin(work, TERM);
    if (begun.status !== "claimed") throw new Error(`${identity} could not be claimed: ${begun.status}`);
    const credentials: CredentialsExpiry = { expiresAt, kind: "server_jwt", issuedAt: clock.now() };
    await registry.complete(begun.claim, "provisioned", credentials);
    lifetimes.set(identity, lifetimeMs);
    if (!nodes.has(identity)) nodes.set(identity, { reprovisionedAt: [], backAt: [] });
  };

  const world: RenewalWorld = {
    clock,
    registry,
    store,
    gate,
    rpc,
    logger,
    metrics,
    nodes,
    refusing: new Map(),
    lost: new Set(),
    comebackMs: 3 * MINUTE_MS,
    settings,
    provision,
    renewal: new Renewal({ settings, gate, registry, store, rpc, prepareRpc: async () => undefined, clock, logger, metrics }),
    async advance(ms: number) {
      const until = clock.now() + ms;
      comebacks.sort((a, b) => a.at - b.at);
      while (comebacks.length > 0 && (comebacks[0]?.at ?? Infinity) <= until) {
        const { identity, at } = comebacks.shift() as { identity: string; at: number };
        clock.advance(at - clock.now());
        await provision(identity, clock.now() + (lifetimes.get(identity) ?? HOUR_MS));
        nodes.get(identity)?.backAt.push(clock.now());
      }
      clock.advance(until - clock.now());
    },
    run: () => world.renewal.run({ remainingMs: () => 10 * MINUTE_MS }),
  };

  rpc.respond("choria_provision#reprovision", (call: RpcCall) => {
    const refusal = world.refusing.get(call.identity);
    if (refusal !== undefined) return statusError(call.identity, "choria_provision#reprovision", refusal);
    if (call.data.token !== TOKEN) return statusError(call.identity, "choria_provision#reprovision", "Incorrect provision token supplied");
    const node = nodes.get(call.identity);
    if (!node) throw new Error(`reprovision sent to unknown node ${call.identity}`);
    node.reprovisionedAt.push(clock.now());
    if (!world.lost.has(call.identity)) comebacks.push({ identity: call.identity, at: clock.now() + world.comebackMs });
    return { message: "Restarting after 5s" };
  });
  return world;
}
