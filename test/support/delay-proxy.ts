/**
 * A loopback TCP proxy in front of an HTTP service (DynamoDB Local) that holds the answer to one
 * chosen request: the request reaches the service at once, so its write is applied, and the
 * answer comes back only after `holdMs` (or never, if the client gave up and closed first). That
 * is a slow answer to a write that landed, which a store client with a request timeout retries.
 */
import { createServer, connect as connectTcp, type Server, type Socket } from "node:net";

export interface DelayProxy {
  /** `http://host:port` of the listening side. */
  readonly endpoint: string;
  /** Holds the answer to the next request whose bytes contain `marker` for `holdMs`. */
  holdNextAnswer(marker: string, holdMs: number): void;
  /** How many answers were held so far. */
  readonly held: number;
  close(): Promise<void>;
}

export async function startDelayProxy(target: { host: string; port: number }): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  let armed: { marker: string; holdMs: number } | undefined;
  let held = 0;

  const server: Server = createServer((client) => {
    const upstream = connectTcp(target.port, target.host);
    sockets.add(client).add(upstream);
    // The request bytes seen since the last answer began, so a marker split across chunks is found.
    let request = "";
    let holdAnswerMs: number | undefined;
    let holding: Buffer[] | undefined;

    client.on("data", (chunk: Buffer) => {
      request += chunk.toString("latin1");
      if (armed && request.includes(armed.marker)) {
        holdAnswerMs = armed.holdMs;
        armed = undefined;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      request = "";
      if (holdAnswerMs !== undefined) {
        const ms = holdAnswerMs;
        holdAnswerMs = undefined;
        held++;
        holding = [chunk];
        setTimeout(() => {
          const answer = holding ?? [];
          holding = undefined;
          if (!client.destroyed) for (const part of answer) client.write(part);
        }, ms);
        return;
      }
      if (holding) holding.push(chunk);
      else client.write(chunk);
    });
    const end = () => {
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };

  return {
    endpoint: `http://127.0.0.1:${port}`,
    get held() {
      return held;
    },
    holdNextAnswer(marker, holdMs) {
      armed = { marker, holdMs };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
