/**
 * What a real go-choria node holds and logged, read from its files: its certificate (serial and
 * notAfter, as `openssl x509` reads them), its server JWT, and the log lines go-choria writes for
 * each `choria_provision#reprovision` it handles or denies and each restart it is asked for. Used by
 * the renewal suites (renewal.test.ts, renewal-failover.test.ts).
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import type { ProvisionedFleet } from "../../dev/local/real-fleet-stack";

export const run = promisify(execFile);

export interface Certificate {
  serial: string;
  notAfterMs: number;
}

export function certificateFile(provisioned: ProvisionedFleet, identity: string): string {
  return join(provisioned.fleet.nodes.get(identity)!.configDir, "ssl", "certificate.pem");
}

export async function certificateOf(provisioned: ProvisionedFleet, identity: string): Promise<Certificate> {
  const { stdout } = await run("openssl", ["x509", "-noout", "-serial", "-enddate", "-in", certificateFile(provisioned, identity)]);
  return {
    serial: /serial=(\S+)/.exec(stdout)?.[1] ?? "",
    notAfterMs: Date.parse(/notAfter=(.+)/.exec(stdout)?.[1] ?? ""),
  };
}

export const serverJwtOf = (provisioned: ProvisionedFleet, identity: string) => readFile(join(provisioned.fleet.nodes.get(identity)!.configDir, "server.jwt"), "utf8");

export interface NodeEvents {
  /** go-choria's "Handling message ... for choria_provision#reprovision" lines: each request it ran. */
  reprovisions: number[];
  /** Its "Denying ... access to choria_provision#reprovision" lines (a denied request is not "handled"). */
  denials: number[];
  /** "Restarting server via request": the restart after `configure`, back into normal mode. */
  restarts: number[];
}

/** The times (epoch ms, to the second: logrus' text format) of the node's lines that matter here. */
export async function nodeEvents(provisioned: ProvisionedFleet, identity: string): Promise<NodeEvents> {
  const lines = (await provisioned.fleet.nodes.get(identity)!.log()).split("\n");
  const times = (pattern: RegExp) =>
    lines.filter((line) => pattern.test(line)).map((line) => Date.parse(/time="([^"]+)"/.exec(line)?.[1] ?? ""));
  return {
    reprovisions: times(/Handling message \S+ for choria_provision#reprovision from /),
    denials: times(/Denying \S+ access to choria_provision#reprovision /),
    restarts: times(/Restarting server via request /),
  };
}
