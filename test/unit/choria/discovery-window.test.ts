import { describe, expect, it } from "vitest";
import { type Scheduler, SlidingWindow } from "../../../lib/nats/sliding-window";
import { identityProblem } from "../../../lib/choria/identity";

/** A manual clock: timers fire only when the test advances time. */
function manualScheduler() {
  let now = 0;
  const timers = new Set<{ at: number; callback: () => void }>();
  const scheduler: Scheduler = {
    schedule(delayMs, callback) {
      const timer = { at: now + delayMs, callback };
      timers.add(timer);
      return { cancel: () => timers.delete(timer) };
    },
  };
  const advance = (ms: number) => {
    now += ms;
    for (const timer of [...timers].sort((a, b) => a.at - b.at)) {
      if (timer.at <= now && timers.delete(timer)) timer.callback();
    }
  };
  return { scheduler, advance, pending: () => timers.size };
}

describe("SlidingWindow", () => {
  it("closes at the cap when nothing arrives", () => {
    const { scheduler, advance } = manualScheduler();
    const window = new SlidingWindow(scheduler, 2_000, 300);

    advance(1_999);
    const openBeforeCap = !window.isClosed;
    advance(1);

    expect(openBeforeCap).toBe(true);
    expect(window.isClosed).toBe(true);
  });

  it("closes 300 ms after the latest reply, each reply restarting the idle timer", () => {
    const { scheduler, advance } = manualScheduler();
    const window = new SlidingWindow(scheduler, 2_000, 300);

    advance(100);
    window.touch();
    advance(250);
    window.touch();
    advance(299);
    const openJustBeforeIdle = !window.isClosed;
    advance(1);

    expect(openJustBeforeIdle).toBe(true);
    expect(window.isClosed).toBe(true);
  });

  it("still ends at the cap while replies keep arriving", () => {
    const { scheduler, advance, pending } = manualScheduler();
    const window = new SlidingWindow(scheduler, 2_000, 300);

    for (let elapsed = 0; elapsed < 2_000; elapsed += 200) {
      window.touch();
      advance(200);
    }

    expect(window.isClosed).toBe(true);
    expect(pending()).toBe(0);
  });

  it("resolves done once and ignores touches after closing", async () => {
    const { scheduler, advance, pending } = manualScheduler();
    const window = new SlidingWindow(scheduler, 2_000, 300);

    window.touch();
    advance(300);
    window.touch();
    await window.done;

    expect(window.isClosed).toBe(true);
    expect(pending()).toBe(0);
  });
});

describe("identity safety", () => {
  it.each(["node1.example.net", "web-01", "a_b.c-d.e", "UPPER.case"])("accepts %s", (identity) => {
    expect(identityProblem(identity)).toBeUndefined();
  });

  it.each([
    ["", /empty/],
    ["*", /wildcard/],
    ["node.>", /wildcard/],
    ["a b", /whitespace/],
    ["a\tb", /whitespace/],
    ["a\u0000b", /control/],
    [".node", /empty subject token/],
    ["node.", /empty subject token/],
    ["a..b", /empty subject token/],
    ["x".repeat(256), /longer than/],
  ])("rejects %j", (identity, reason) => {
    expect(identityProblem(identity)).toMatch(reason);
  });
});
