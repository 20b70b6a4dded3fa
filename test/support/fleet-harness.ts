/**
 * What the engine and chaos suites run their fleets on: one nats-server and client connection per
 * test file, the simulated fleets its tests start (each test its own, stopped with stopFleets), and
 * helper scripts written to a scratch directory of the file's.
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "nats";
import { startNats, type RunningNats } from "../../dev/local/services";
import { startFleet, type Fleet, type FleetOptions } from "../../dev/simulator";

/** What a suite fixes for every fleet it starts: at least the provisioning token. */
export type FleetDefaults = Omit<Partial<FleetOptions>, "natsUrl"> & { token: string };

/** A suite's harness extends this with its own static `start` (a broker from `broker()`, its fleet defaults, whatever else it needs). */
export class FleetHarness {
  private readonly fleets: Fleet[] = [];
  private scratch: string | undefined;

  protected constructor(
    readonly nats: RunningNats,
    readonly nc: NatsConnection,
    private readonly defaults: FleetDefaults,
  ) {}

  /** A broker and a connection to it, for a subclass's own `start`. */
  static async broker(): Promise<{ nats: RunningNats; nc: NatsConnection }> {
    const nats = await startNats();
    return { nats, nc: await connect({ servers: nats.url }) };
  }

  /** A fleet on the broker: simulator restarts/shutdowns after 50 ms, discovery unrecorded, then the suite's defaults and `options`. */
  async fleet(options: Omit<FleetOptions, "natsUrl" | "token"> & { token?: string }): Promise<Fleet> {
    const fleet = await startFleet({ natsUrl: this.nats.url, restartDelayMs: 50, shutdownDelayMs: 50, recordDiscovery: false, ...this.defaults, ...options });
    this.fleets.push(fleet);
    return fleet;
  }

  async stopFleets(): Promise<void> {
    await Promise.all(this.fleets.splice(0).map((fleet) => fleet.stop()));
  }

  /** Writes an executable Node helper script; returns its path (the command line). */
  async helperScript(name: string, body: string): Promise<string> {
    const path = await this.scratchFile(name, `#!/usr/bin/env node\n${body}\n`);
    await chmod(path, 0o755);
    return path;
  }

  /** Writes `content` to `name` in the file's scratch directory; returns its path. */
  async scratchFile(name: string, content: string): Promise<string> {
    this.scratch ??= await mkdtemp(join(tmpdir(), "fleet-harness-"));
    const path = join(this.scratch, name);
    await writeFile(path, content);
    return path;
  }

  async stop(): Promise<void> {
    await this.stopFleets();
    if (this.scratch) await rm(this.scratch, { recursive: true, force: true });
    await this.nc.close();
    await this.nats.stop();
  }
}
