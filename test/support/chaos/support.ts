/**
 * Shared pieces of the chaos suite: a helper that answers in-process, an error-chain matcher, a
 * check that a provisioning outcome carries a specific named error rather than a wrapped TypeError
 * (the engine wraps anything unexpected in a bare ProvisionerError, which hides bugs), and the
 * engine wired to a real nats-server and the fleet simulator. Two test adaptations, both through
 * the engine's ports: RPC waits are capped and the backoff between attempts is shortened.
 */
import type { NatsConnection } from "nats";
import { NatsChoriaRpc, type ChoriaClientSettings } from "../../../lib/nats/rpc-client";
import { engineSettings } from "../engine-settings";
import { ProvisionEngine } from "../../../lib/engine/provision";
import type { EngineSettings } from "../../../lib/engine/settings";
import type { ProvisionOutcome } from "../../../lib/engine/outcome";
import { ProvisionerError } from "../../../lib/errors";
import type { ChoriaRpc } from "../../../lib/ports/rpc";
import type { HelperRequest, HelperResponse, HelperRunner } from "../../../lib/ports/helper";
import type { HostWork } from "../../../lib/ports/host-work";
import type { PauseGate } from "../../../lib/ports/lease-gate";
import type { Fleet } from "../../../dev/simulator";
import { noMetrics, realClock } from "../fakes";
import { FleetHarness } from "../fleet-harness";
import { helperResponseWith } from "../helper-response";

function configuringResponse(identity: string, extra: Partial<HelperResponse> = {}): HelperResponse {
  return helperResponseWith({ configuration: { identity, "plugin.choria.server.provision": "false", loglevel: "info" }, ...extra });
}

/** A helper that configures every host, counting the requests it saw per identity; `onRun` lets a test act at that point of a sequence. */
export class CountingHelper implements HelperRunner {
  readonly runs = new Map<string, number>();
  onRun: ((identity: string) => void) | undefined;

  constructor(private readonly extra: Partial<HelperResponse> = {}) {}

  async run(request: HelperRequest): Promise<HelperResponse> {
    this.runs.set(request.identity, (this.runs.get(request.identity) ?? 0) + 1);
    this.onRun?.(request.identity);
    return configuringResponse(request.identity, this.extra);
  }
}

type ErrorClass = abstract new (...args: never[]) => Error;

/** The error and every `cause` below it. */
function errorChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current !== undefined && chain.length < 10; current = (current as { cause?: unknown }).cause) chain.push(current);
  return chain;
}

export function chainHas(error: unknown, kind: ErrorClass): boolean {
  return errorChain(error).some((entry) => entry instanceof kind);
}

/** What a chaos test asserts about one host: how it ended and which named error stopped it. */
export function describeOutcome(outcome: ProvisionOutcome): string {
  if (outcome.kind !== "failed" && outcome.kind !== "paused" && outcome.kind !== "deferred") return outcome.kind;
  const error = outcome.error;
  const named = error.constructor !== ProvisionerError && error instanceof ProvisionerError;
  return `${outcome.kind}${"step" in outcome ? `@${outcome.step}` : ""}:${named ? "named" : `UNNAMED ${error.name}: ${error.message}`}`;
}

export const TOKEN = "chaos-provisioning-token";
export const SENDER_ID = "provisioner.chaos.example.net";
export const CALLER_ID = "choria=provisioner.chaos";
const BACKOFF_SCALE = 20;

/** Wall and monotonic time are real; only the backoff between RPC attempts is shortened. */
const shortBackoffClock = realClock({ sleepDivisor: BACKOFF_SCALE });

/** The gate of a deployment that holds its lease throughout (the hostile-input tests are not about leadership). */
const openGate: PauseGate = {
  assertOpen: async (term, attemptTimeoutMs) => ({ term, stampedAt: Date.now(), endsBy: performance.now() + attemptTimeoutMs }),
};

export function natsRpc(nc: NatsConnection, extra: Partial<ChoriaClientSettings> = {}): NatsChoriaRpc {
  return new NatsChoriaRpc(nc, { senderId: SENDER_ID, callerId: CALLER_ID, protocolVersion: 1, signer: { version: 1, kind: "insecure" }, ...extra });
}

export function requestsTo(fleet: Fleet, identity: string): string[] {
  return fleet.record.filter((entry) => entry.identity === identity).map((entry) => `${entry.action}:${entry.outcome}`);
}

export interface ChaosEngineOptions {
  fleet: Fleet;
  helper: HelperRunner;
  rpc: ChoriaRpc;
  features?: Partial<EngineSettings["features"]>;
  settings?: Partial<Omit<EngineSettings, "features">>;
}

/** The engine as a deployment wires it, with the backoff between attempts shortened. */
export function chaosEngine(options: ChaosEngineOptions): { engine: ProvisionEngine; work(identity: string): HostWork } {
  const engine = new ProvisionEngine({
    settings: engineSettings(TOKEN, {
      features: options.features,
      upgradesRepository: "https://packages.example.net/choria",
      jwtVerifier: { kind: "ed25519", publicKey: options.fleet.signer.publicKey },
      ...options.settings,
    }),
    rpc: options.rpc,
    gate: openGate,
    helper: options.helper,
    metrics: noMetrics,
    clock: shortBackoffClock,
    random: () => 0.5,
  });
  return { engine, work: (identity) => ({ identity, term: 1, admittedAt: Date.now(), source: "discovery" }) };
}

/** One nats-server and one client connection per test file, fleets per test, helper scripts in a scratch dir. */
export class ChaosHarness extends FleetHarness {
  static async start(): Promise<ChaosHarness> {
    const { nats, nc } = await FleetHarness.broker();
    return new ChaosHarness(nats, nc, { token: TOKEN });
  }
}
