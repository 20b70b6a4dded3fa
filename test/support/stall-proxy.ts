/**
 * A loopback TCP proxy whose path can be stalled: `freeze()` stops moving bytes in both directions
 * while every connection stays open (TCP open, no bytes: what a black-holed route or a hung peer
 * looks like from the client), and `thaw()` lets the held bytes through in order. Used to put a
 * stalled network path between one deployment and the broker or DynamoDB.
 */
import { createServer, connect as connectTcp, type Server, type Socket } from "node:net";

export interface StallProxy {
  /** `host:port` of the listening side. */
  readonly address: string;
  /** Holds every byte from now on, in both directions; connections stay open. */
  freeze(): void;
  /** Delivers what was held, in order, and moves bytes again. */
  thaw(): void;
  /** A store blip: resets every open connection and refuses new ones for `ms` (real time). */
  blip(ms: number): void;
  readonly frozen: boolean;
  close(): Promise<void>;
}

export async function startStallProxy(target: { host: string; port: number }): Promise<StallProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let frozen = false;
  const held: Array<() => void> = [];

  const forward = (from: Socket, to: Socket) => {
    from.on("data", (chunk) => {
      if (frozen) held.push(() => to.write(chunk));
      else to.write(chunk);
    });
  };

  let refuseUntil = 0;
  const server: Server = createServer((client) => {
    if (performance.now() < refuseUntil) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connectTcp(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    forward(client, upstream);
    forward(upstream, client);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };

  return {
    address: `127.0.0.1:${port}`,
    get frozen() {
      return frozen;
    },
    freeze() {
      frozen = true;
    },
    thaw() {
      frozen = false;
      for (const deliver of held.splice(0)) deliver();
    },
    blip(ms) {
      refuseUntil = performance.now() + ms;
      for (const [client, upstream] of pairs) {
        client.resetAndDestroy();
        upstream.destroy();
      }
    },
    async close() {
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `host` and `port` of a `nats://host:port` or `http://host:port` URL. */
export function hostAndPort(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port) };
}
