import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { agentFilter } from "../../../lib/choria/filter";
import type { LifecycleEvent } from "../../../lib/choria/lifecycle";
import type { IncomingRequest } from "../../support/choria-node/protocol";
import { type NodeOptions, type RpcRecord, SimulatedNode } from "../../../dev/simulator";
import type { NodeFaults } from "../../../dev/simulator/faults";
import { ManualClock } from "../../support/fakes";

let rsaKey: KeyObject | undefined;
export function testRsaKey(): KeyObject {
  rsaKey ??= generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
  return rsaKey;
}

export const PROVISIONER = { senderId: "provisioner.example.net", callerId: "choria=provisioner.mcollective" };

export interface Harness {
  node: SimulatedNode;
  clock: ManualClock;
  events: LifecycleEvent[];
  records: RpcRecord[];
  listening: boolean[];
  call(agent: string, action: string, data?: unknown, overrides?: Partial<IncomingRequest>): Promise<Reply | undefined>;
  request(agent: string, payload: Uint8Array, overrides?: Partial<IncomingRequest>): IncomingRequest;
}

export interface Reply {
  action: string;
  statuscode: number;
  statusmsg: string;
  data: Record<string, unknown>;
}

export function harness(options: Partial<NodeOptions> & { jwt?: string | undefined; faults?: NodeFaults } = {}): Harness {
  const clock = new ManualClock();
  const events: LifecycleEvent[] = [];
  const records: RpcRecord[] = [];
  const listening: boolean[] = [];
  const jwt = "jwt" in options ? options.jwt : "header.claims.signature";
  const node = new SimulatedNode(
    {
      identity: "node1.example.net",
      version: "0.30.0",
      protocolVersion: 1,
      token: "s3cret",
      provisionDefault: true,
      upgradable: false,
      facts: { role: "web" },
      restartDelayMs: 2000,
      shutdownDelayMs: 1000,
      ...options,
    },
    {
      clock,
      provisioningJwt: async () => jwt,
      rsaKey: async () => testRsaKey(),
      publishLifecycle: (event) => events.push(event),
      record: (entry) => records.push(entry),
      listeningChanged: (value) => listening.push(value),
      random: () => 0,
    },
  );
  node.start();

  const request = (agent: string, payload: Uint8Array, overrides: Partial<IncomingRequest> = {}): IncomingRequest => ({
    version: 1,
    replyTo: "provisioning.reply.x.y",
    transportSender: PROVISIONER.senderId,
    id: "0123456789abcdef0123456789abcdef",
    ...PROVISIONER,
    collective: "provisioning",
    agent,
    ttl: 60,
    timeSeconds: Math.trunc(clock.now() / 1000),
    filter: agentFilter(agent),
    payload,
    ...overrides,
  });

  return {
    node,
    clock,
    events,
    records,
    listening,
    request,
    async call(agent, action, data = {}, overrides = {}) {
      const body = new TextEncoder().encode(JSON.stringify({ agent, action, data }));
      const reply = await node.handle(request(agent, body, overrides));
      if (!reply) return undefined;
      return JSON.parse(new TextDecoder().decode(reply.payload)) as Reply;
    },
  };
}
