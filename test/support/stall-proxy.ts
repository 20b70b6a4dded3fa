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
  /**
   * Until the next thaw, every connection that carries a request containing `marker` (e.g. one
   * item's key) has its answers held: those requests arrive and apply, their responses stay in the
   * network; other connections move freely. Resolves when the first such request passes.
   */
  holdResponsesTo(marker: string): Promise<void>;
  /** Delivers what was held, in order, and moves bytes again. */
  thaw(): void;
  /** A store blip: resets every open connection and refuses new ones for `ms` (real time). */
  blip(ms: number): void;
  readonly frozen: boolean;
  close(): Promise<void>;
}

interface Path {
  /** This connection carried a request for the marker of `holdResponsesTo`: its answers are held. */
  holdingResponses: boolean;
}

export async function startStallProxy(target: { host: string; port: number }): Promise<StallProxy> {
  const pairs = new Set<[Socket, Socket]>();
  const paths = new Set<Path>();
  let frozen = false;
  const held: Array<() => void> = [];
  let responsesHeldTo: { marker: string; fired: () => void } | undefined;

  const deliverOrHold = (hold: boolean, move: () => void) => {
    if (frozen || hold) held.push(move);
    else move();
  };
  const forward = (from: Socket, to: Socket, path: Path, direction: "requests" | "responses") => {
    const holds = () => direction === "responses" && path.holdingResponses;
    from.on("data", (chunk: Buffer) => {
      if (direction === "requests" && responsesHeldTo && chunk.includes(responsesHeldTo.marker)) {
        path.holdingResponses = true;
        responsesHeldTo.fired();
      }
      deliverOrHold(holds(), () => {
        if (to.writable) to.write(chunk);
      });
    });
    // A peer that closes after sending: what it sent is already in the network and still arrives
    // (a kernel keeps delivering it), so the other side is ended only after the held bytes.
    from.on("end", () => deliverOrHold(holds(), () => to.end()));
  };

  let refuseUntil = 0;
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    if (performance.now() < refuseUntil) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connectTcp({ port: target.port, host: target.host, allowHalfOpen: true });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const path: Path = { holdingResponses: false };
    paths.add(path);
    forward(client, upstream, path, "requests");
    forward(upstream, client, path, "responses");
    const closed = () => {
      if (!client.destroyed || !upstream.destroyed) return;
      pairs.delete(pair);
      paths.delete(path);
    };
    // A client that vanishes (reset, destroyed) still has its held bytes delivered; then the
    // upstream side is closed after them. An upstream failure closes the client at once.
    client.on("error", () => deliverOrHold(false, () => upstream.end())).on("close", () => {
      deliverOrHold(false, () => upstream.end());
      closed();
    });
    upstream.on("error", () => client.destroy()).on("close", () => {
      client.destroy();
      closed();
    });
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
    holdResponsesTo(marker) {
      return new Promise<void>((resolve) => (responsesHeldTo = { marker, fired: resolve }));
    },
    thaw() {
      frozen = false;
      responsesHeldTo = undefined;
      for (const path of paths) path.holdingResponses = false;
      for (const deliver of held.splice(0)) deliver();
    },
    blip(ms) {
      refuseUntil = performance.now() + ms;
      // A reset discards what was held for these connections, as a kernel discards its send buffer.
      held.splice(0);
      for (const [client, upstream] of pairs) {
        client.resetAndDestroy();
        upstream.destroy();
      }
    },
    async close() {
      held.splice(0);
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
