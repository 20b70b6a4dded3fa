import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { parentRelaysSignals, relaysSignals, watchStopSignals } from "../../../dev/local/stop-signals";

function watched(deliveriesPerPress: number) {
  const signals = new EventEmitter();
  const calls: string[] = [];
  watchStopSignals(
    { onStop: (why) => calls.push(`stop: ${why}`), onForce: (why) => calls.push(`force: ${why}`) },
    { deliveriesPerPress, signals },
  );
  return { signals, calls };
}

describe("stop signals", () => {
  it("takes a relayed copy of one Ctrl-C, however late, for the same press", () => {
    const { signals, calls } = watched(2);

    signals.emit("SIGINT");
    signals.emit("SIGINT");

    expect(calls).toEqual(["stop: interrupted"]);
  });

  it("forces the exit on the next press under a relaying parent", () => {
    const { signals, calls } = watched(2);

    for (let delivery = 0; delivery < 3; delivery++) signals.emit("SIGINT");

    expect(calls).toEqual(["stop: interrupted", "force: interrupted"]);
  });

  it("forces the exit on the second delivery when nothing relays", () => {
    const { signals, calls } = watched(1);

    signals.emit("SIGTERM");
    signals.emit("SIGINT");

    expect(calls).toEqual(["stop: terminated", "force: interrupted"]);
  });

  it("knows npm and the tsx CLI as relaying parents, and a shell as not", () => {
    expect(relaysSignals(["npm run local"])).toBe(true);
    expect(relaysSignals(["/usr/bin/node", "/usr/lib/node_modules/npm/bin/npm-cli.js", "run", "local"])).toBe(true);
    expect(relaysSignals(["node", "/work/node_modules/tsx/dist/cli.mjs", "scripts/local.ts"])).toBe(true);
    expect(relaysSignals(["sh", "-c", "node --import tsx scripts/local-services.ts"])).toBe(false);
    expect(relaysSignals(["bash"])).toBe(false);
  });

  it("falls back to npm's mark on the environment where the parent's command line cannot be read", () => {
    const unreadable = 2 ** 30;

    expect(parentRelaysSignals(unreadable, { npm_lifecycle_event: "local" })).toBe(true);
    expect(parentRelaysSignals(unreadable, {})).toBe(false);
  });
});
