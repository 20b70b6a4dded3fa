import { readFileSync } from "node:fs";

/**
 * How the local scripts hear "stop": the first SIGINT, SIGTERM or SIGHUP, or the parent process
 * going away, starts the orderly stop; another Ctrl-C after that forces the exit.
 *
 * One Ctrl-C can arrive twice. The terminal signals the whole foreground process group, and a parent
 * that relays signals to its child sends it once more: npm (its run-script forwards SIGINT and
 * SIGTERM to the script) and the tsx CLI. On a loaded machine the relayed copy can come more than a
 * second after the first, so copies are counted, never timed: the exit is forced only by more
 * deliveries than one press makes. (Two deliveries that land together are merged by the kernel; a
 * forced exit may then take one press more, never one press less.)
 */
export interface StopSignalHandlers {
  /** The orderly stop: called once, with why ("interrupted", "terminated", ...). */
  onStop: (why: string) => void;
  /** A second press while the orderly stop runs: the caller exits at once. */
  onForce: (why: string) => void;
}

const SIGNAL_WORDS = { SIGINT: "interrupted", SIGTERM: "terminated", SIGHUP: "hung up" } as const;
/** How often the parent's presence is checked. */
const PARENT_CHECK_MS = 500;

export interface StopSignalOptions {
  /** How many deliveries one Ctrl-C makes; by default 2 under a relaying parent, else 1. */
  deliveriesPerPress?: number;
  /** Where the signals are heard (tests give an emitter of their own). */
  signals?: Pick<NodeJS.EventEmitter, "on">;
}

export function watchStopSignals(handlers: StopSignalHandlers, options: StopSignalOptions = {}): void {
  const perPress = options.deliveriesPerPress ?? (parentRelaysSignals() ? 2 : 1);
  const signals = options.signals ?? process;
  let deliveries = 0;
  let stopping = false;
  const begin = (why: string) => {
    if (stopping) return;
    stopping = true;
    handlers.onStop(why);
  };
  for (const [signal, why] of Object.entries(SIGNAL_WORDS)) {
    signals.on(signal, () => {
      deliveries += 1;
      if (deliveries > perPress) handlers.onForce(why);
      else begin(why);
    });
  }
  // A parent that went away (npm killed) starts the stop; it never forces one that already runs.
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    begin("the parent process exited");
  }, PARENT_CHECK_MS);
  watch.unref();
}

/**
 * Whether this process's parent relays the signals it receives to it (npm, the tsx CLI). Where
 * /proc cannot tell (macOS), npm's own mark on its scripts' environment does.
 */
export function parentRelaysSignals(parentPid: number = process.ppid, env: NodeJS.ProcessEnv = process.env): boolean {
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${parentPid}/cmdline`, "utf8").split("\0").filter((arg) => arg !== "");
  } catch {
    return env.npm_lifecycle_event !== undefined;
  }
  return relaysSignals(argv);
}

/** npm sets its process title to "npm <command>"; before that, or as `node npm-cli.js`, the script path tells. */
export function relaysSignals(parentArgv: readonly string[]): boolean {
  const [first = ""] = parentArgv;
  if (/^npm(\s|$)/.test(first) || /(^|\/)npm$/.test(first)) return true;
  return parentArgv.some((arg) => /(^|\/)npm-cli\.js$|(^|\/)tsx\/dist\/cli\.m?js$|(^|\/)\.bin\/tsx$/.test(arg));
}
