/**
 * What the site's administrator sees after provisioning, with the real `choria` CLI on the target
 * broker: every provisioned node answers `choria ping`, and every node authorizes and answers
 * `rpcutil inventory` (a node that is reachable but refuses the admin would reply "not authorized").
 */
import { expect } from "vitest";
import type { ProvisionedFleet } from "../../dev/local/real-fleet-stack";

interface RpcReply {
  sender: string;
  statuscode: number;
  statusmsg: string;
  data: { agents?: string[]; collectives?: string[] };
}

export async function adminReachesEveryNode(provisioned: ProvisionedFleet, identities: string[]): Promise<void> {
  const admin = await provisioned.fleet.adminClient();
  const expected = [...identities].sort();

  const ping = await admin.choria(["ping"]);
  expect(ping, ping.stderr).toMatchObject({ code: 0 });
  const ponged = ping.stdout.split("\n").flatMap((line) => /^(\S+)\s+time=\d+/.exec(line.trim())?.[1] ?? []);
  expect(ponged.sort()).toEqual(expected);
  expect(ping.stdout).toContain(`${identities.length} replies`);

  const inventory = await admin.choria(["req", "rpcutil", "inventory", "--json"]);
  expect(inventory, inventory.stderr).toMatchObject({ code: 0 });
  const result = JSON.parse(inventory.stdout) as { replies: RpcReply[]; request_stats: { discovered: number; ok: number; failed: number } };
  expect(result.replies.map((reply) => reply.sender).sort()).toEqual(expected);
  for (const reply of result.replies) {
    expect({ sender: reply.sender, statuscode: reply.statuscode, statusmsg: reply.statusmsg }).toEqual({ sender: reply.sender, statuscode: 0, statusmsg: "OK" });
    expect(reply.data.agents).toContain("rpcutil");
  }
  expect(result.request_stats).toMatchObject({ discovered: identities.length, ok: identities.length, failed: 0 });
}
