/**
 * The simulated fleet for bench/peer.ts, in a process of its own so its CPU is not charged to the
 * provisioner being measured. Started with an IPC channel by the benchmark; reads its settings from
 * PEER_FLEET (JSON: natsUrl, count, signerSeedHex, token, restartDelayMs). It reports
 * `{ type: "ready" }` once every node is subscribed, then every 200 ms the nodes that acknowledged
 * their restart since the last report (`{ type: "restarted", nodes: [[identity, epochMs], ...] }`,
 * read from the nodes' own request record), the times they answered `inventory`, a count of refused
 * requests, and the times discovery broadcasts reached the fleet: once per request, from one
 * subscription of its own to the provisioning collective's discovery subject (the nodes' own record
 * would hold one entry per node per discovery). `ready` carries when the nodes started, which is
 * when they published their startup events. `{ type: "stop" }` stops the fleet and exits.
 */
import { connect } from "nats";
import { broadcastSubject } from "../lib/choria/protocol";
import { decodeHex } from "../lib/crypto/encoding";
import { ed25519SigningKey } from "../test/support/choria-node/keys";
import { startFleet } from "../dev/simulator";
import { PROVISIONING_COLLECTIVE } from "../dev/simulator/node";

interface FleetSettings {
  natsUrl: string;
  count: number;
  signerSeedHex: string;
  token: string;
  restartDelayMs: number;
}

export type FleetReport =
  | { type: "ready"; identities: number; startedAt: number }
  | { type: "restarted"; nodes: Array<[string, number]>; inventory: Array<[string, number]>; discoveries: number[]; refused: number; lastRefusal?: string };

const send = (report: FleetReport) => process.send?.(report);

async function main(): Promise<void> {
  const settings = JSON.parse(process.env.PEER_FLEET ?? "{}") as FleetSettings;
  const discoveries: number[] = [];
  const watcher = await connect({ servers: settings.natsUrl, name: "peer-bench-discovery-watch" });
  watcher.subscribe(broadcastSubject(PROVISIONING_COLLECTIVE, "discovery"), { callback: () => discoveries.push(Date.now()) });
  const startedAt = Date.now();
  const fleet = await startFleet({
    natsUrl: settings.natsUrl,
    count: settings.count,
    provisioningSigner: ed25519SigningKey(decodeHex(settings.signerSeedHex)),
    token: settings.token,
    restartDelayMs: settings.restartDelayMs,
    recordDiscovery: false,
  });
  send({ type: "ready", identities: fleet.identities.length, startedAt });

  let scanned = 0;
  let refused = 0;
  let lastRefusal: string | undefined;
  const restarted = new Set<string>();
  const report = () => {
    const nodes: Array<[string, number]> = [];
    // When each node answered rpcutil#inventory, the provisioner's last RPC before its helper (bench/stages.ts).
    const inventory: Array<[string, number]> = [];
    for (; scanned < fleet.record.length; scanned++) {
      const entry = fleet.record[scanned];
      if (!entry) continue;
      if (entry.outcome !== 0) {
        refused++;
        lastRefusal = `${entry.identity} ${entry.agent}#${entry.action}: ${entry.statusmsg ?? entry.reason ?? String(entry.outcome)}`;
      } else if (entry.action === "inventory" && !restarted.has(entry.identity)) {
        inventory.push([entry.identity, entry.timeMs]);
      } else if (entry.action === "restart" && !restarted.has(entry.identity)) {
        restarted.add(entry.identity);
        nodes.push([entry.identity, entry.timeMs]);
      }
    }
    // The record is only read forward; drop what was read so a long run does not hold it all.
    fleet.record.splice(0, scanned);
    scanned = 0;
    send({ type: "restarted", nodes, inventory, discoveries: discoveries.splice(0), refused, ...(lastRefusal === undefined ? {} : { lastRefusal }) });
  };
  const timer = setInterval(report, 200);

  process.on("message", (message: { type?: string }) => {
    if (message.type !== "stop") return;
    clearInterval(timer);
    report();
    void Promise.all([fleet.stop(), watcher.close()]).finally(() => process.exit(0));
  });
  process.on("disconnect", () => process.exit(0));
}

main().catch((error: unknown) => {
  process.stderr.write(`peer fleet: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
