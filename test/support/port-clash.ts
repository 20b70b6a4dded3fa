/**
 * A service started on a port that `freePort()` (dev/local/services.ts) picked: it probes a free
 * loopback port, closes it and hands back the number, and the service binds it only later, once its
 * process is up (a JVM or a go-choria broker takes seconds under load). Anything else on the
 * machine can take the port in that window: another test run beside this one, or any outgoing
 * connection, whose local port comes from the same ephemeral range. The port cannot be held across
 * the handover (the service is another process), so a start that lost its port is started again
 * with a fresh one; each caller's start cleans up after itself on failure, so a retry leaks nothing.
 */
import { readdir, readFile, readlink } from "node:fs/promises";
import { freePort } from "../../dev/local/services";

/** Starts that lost their port are tried this often in all: three losses in a row would mean more than a race. */
const ATTEMPTS = 3;

/** What the services print when their port was taken: Go's and Node's bind error, and Java's BindException. */
const PORT_TAKEN = /address already in use|EADDRINUSE/i;

/** Whether `error` (or an error it wraps) says the service could not bind its port. */
function lostItsPort(error: unknown): boolean {
  for (let current: unknown = error; current instanceof Error; current = current.cause) {
    if (PORT_TAKEN.test(current.message)) return true;
  }
  return false;
}

/** Runs `start`, again (up to ATTEMPTS in all) when it failed only because its port was taken meanwhile. */
export async function retriedOnPortClash<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (error) {
      if (attempt >= ATTEMPTS || !lostItsPort(error)) throw error;
    }
  }
}

/** The socket inodes listening on TCP `port` (any address, IPv4 or IPv6), from /proc/net. */
async function listenerInodes(port: number): Promise<Set<string>> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const text = await readFile(table, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDR:PORT in hex; state 0A is LISTEN; the inode is the tenth field.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === "0A" && fields[9]) inodes.add(fields[9]);
    }
  }
  return inodes;
}

/** Whether process `pid` holds a socket listening on `port`. */
async function listensOn(pid: number, port: number): Promise<boolean> {
  const inodes = await listenerInodes(port);
  if (inodes.size === 0) return false;
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (inode && inodes.has(inode)) return true;
  }
  return false;
}

/**
 * Starts a service on a fresh free port until it is the one listening there (up to ATTEMPTS).
 * For a service whose readiness check cannot tell it from another listener on the same port:
 * DynamoDB Local prints its settings before it binds, and its HTTP check is answered by any HTTP
 * server, e.g. another run's DynamoDB Local, while this JVM has died of a BindException.
 */
export async function startedOnOwnPort<T extends { port: number; readonly pid: number | undefined }>(
  start: (port: number) => Promise<T>,
  stop: (started: T) => Promise<unknown>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    let started: T;
    try {
      started = await start(port);
    } catch (error) {
      // The check failed against whatever took the port (e.g. a NATS server), not with a bind error.
      const taken = lostItsPort(error) || (await listenerInodes(port)).size > 0;
      if (attempt >= ATTEMPTS || !taken) throw error;
      continue;
    }
    if (started.pid !== undefined && (await listensOn(started.pid, port))) return started;
    await stop(started);
    if (attempt >= ATTEMPTS) throw new Error(`the service started on port ${port} is not the one listening there (address already in use)`);
  }
}
