import { describe, expect, it } from "vitest";
import type { WaitingName } from "../../../lib/ports/admission-store";
import { selectDiscovered, type SelectionLimits } from "../../../lib/app/discovery-selection";
import { seededRandom } from "../../support/random";

const forged = (count: number, round = 0) => Array.from({ length: count }, (_, index) => `forged-${round}-${index}.example.net`);
const real = ["web1.example.net", "web2.example.net", "web3.example.net"];
const NOW = 1_700_000_000_000;

/** A discovery at `now` with no memory unless given, and a seeded order. */
function select(identities: readonly string[], known: ReadonlySet<string>, limits: SelectionLimits, waiting: readonly WaitingName[] = [], now = NOW, seed = 1) {
  return selectDiscovered(identities, known, limits, { waiting, now, random: seededRandom(seed) });
}

describe("selectDiscovered", () => {
  it("puts known names first even when a flood of new names arrived before them", () => {
    // Arrange
    const names = [...forged(12_004), ...real];
    const known = new Set(["web3.example.net", "web1.example.net", "web2.example.net"]);

    // Act
    const selection = select(names, known, { cap: 100, newBudget: 10 });

    // Assert
    expect(selection.selected.slice(0, 3)).toEqual(real);
    expect(selection.selected.slice(3)).toHaveLength(10);
    expect(selection.selected.slice(3).every((name) => name.startsWith("forged-"))).toBe(true);
    expect(selection).toMatchObject({ droppedOverBudget: 12_004 - 10, droppedOverCap: 0 });
  });

  it("admits new names up to the budget in a uniformly random order, not the order of arrival, once each", () => {
    // Arrange
    const names = ["a", "b", "c", "d", "e"];
    const chosen = new Map<string, number>();
    const random = seededRandom(3);

    // Act
    for (let round = 0; round < 5_000; round++) {
      const selection = selectDiscovered([...names, "a"], new Set(), { cap: 100, newBudget: 1 }, { waiting: [], now: NOW, random });
      const [name] = selection.selected;
      chosen.set(name!, (chosen.get(name!) ?? 0) + 1);
      expect(selection).toMatchObject({ droppedOverBudget: 4, droppedOverCap: 0 });
    }

    // Assert: each name about a fifth of the time, the last to arrive as often as the first.
    expect([...chosen.keys()].sort()).toEqual(names);
    for (const count of chosen.values()) {
      expect(count).toBeGreaterThan(850);
      expect(count).toBeLessThan(1_150);
    }
  });

  it("bounds known and new names together by the cap, known ones taking the room first", () => {
    // Arrange
    const known = new Set(["k1", "k2", "k3"]);

    // Act
    const roomForOneNew = select(["n1", "k1", "n2", "k2"], known, { cap: 3, newBudget: 10 });
    const knownOverCap = select(["k1", "k2", "k3", "n1"], known, { cap: 2, newBudget: 10 });

    // Assert
    expect(roomForOneNew.selected.slice(0, 2)).toEqual(["k1", "k2"]);
    expect(["n1", "n2"]).toContain(roomForOneNew.selected[2]);
    expect(roomForOneNew).toMatchObject({ droppedOverBudget: 1, droppedOverCap: 0 });
    expect(knownOverCap).toMatchObject({ selected: ["k1", "k2"], droppedOverBudget: 1, droppedOverCap: 1 });
  });

  it("remembers the names it left waiting, first seen now, ahead of the ones it chose", () => {
    // Act
    const selection = select([...forged(50), ...real], new Set(), { cap: 100, newBudget: 10 });

    // Assert
    const left = [...forged(50), ...real].filter((name) => !selection.selected.includes(name));
    expect(selection.waiting.slice(0, 43).map((name) => name.identity).sort()).toEqual(left.sort());
    expect(selection.waiting.slice(43).map((name) => name.identity)).toEqual(selection.selected);
    expect(selection.waiting.every((name) => name.firstSeen === NOW && name.lastSeen === NOW)).toBe(true);
  });

  it("admits the names seen waiting before ahead of a flood of fresh ones, whatever arrived first", () => {
    // Arrange: the nodes were left waiting a discovery ago; the forger sends 50 fresh names first now.
    const waiting = real.map((identity) => ({ identity, firstSeen: NOW - 60_000, lastSeen: NOW - 60_000 }));

    // Act
    const selection = select([...forged(50, 2), ...real], new Set(), { cap: 100, newBudget: 10 }, waiting);

    // Assert
    expect(selection.selected.slice(0, 3).sort()).toEqual(real);
    for (const identity of real) expect(selection.waiting).toContainEqual({ identity, firstSeen: NOW - 60_000, lastSeen: NOW });
  });

  it("takes the oldest first-seen first, and names first seen together in a random order", () => {
    // Arrange
    const waiting = [
      { identity: "young", firstSeen: NOW - 1_000, lastSeen: NOW - 1_000 },
      { identity: "old-1", firstSeen: NOW - 5_000, lastSeen: NOW - 1_000 },
      { identity: "old-2", firstSeen: NOW - 5_000, lastSeen: NOW - 1_000 },
    ];
    const names = ["fresh", "young", "old-1", "old-2"];

    // Act
    const firsts = new Set(Array.from({ length: 40 }, (_, seed) => select(names, new Set(), { cap: 100, newBudget: 1 }, waiting, NOW, seed).selected[0]));
    const two = select(names, new Set(), { cap: 100, newBudget: 3 }, waiting);

    // Assert
    expect(firsts).toEqual(new Set(["old-1", "old-2"]));
    expect(two.selected.slice(0, 2).sort()).toEqual(["old-1", "old-2"]);
    expect(two.selected[2]).toBe("young");
  });

  it("lets known names leave the memory and keeps unseen ones after the names of this discovery", () => {
    // Arrange
    const waiting = [
      { identity: "admitted", firstSeen: NOW - 5_000, lastSeen: NOW - 5_000 },
      { identity: "missed-a-reply", firstSeen: NOW - 5_000, lastSeen: NOW - 5_000 },
    ];

    // Act
    const selection = select(["admitted", "n1", "n2"], new Set(["admitted"]), { cap: 100, newBudget: 1 }, waiting);

    // Assert: the new name left out, the one chosen, then the one not seen this time, as it was.
    const [, chosen] = selection.selected;
    const leftOut = chosen === "n1" ? "n2" : "n1";
    expect(selection.waiting.map((name) => name.identity)).toEqual([leftOut, chosen, "missed-a-reply"]);
    expect(selection.waiting.at(-1)).toEqual(waiting[1]);
  });

  it("remembers at most four discoveries' worth of new names and never fewer than 1,000, a random share of a larger flood", () => {
    // Act
    const selection = select(forged(5_000), new Set(), { cap: 10_000, newBudget: 10 });
    const other = select(forged(5_000), new Set(), { cap: 10_000, newBudget: 10 }, [], NOW, 2);
    const larger = select(forged(10_000), new Set(), { cap: 20_000, newBudget: 1_000 });

    // Assert
    expect(larger.waiting).toHaveLength(4_000);
    expect(selection.waiting).toHaveLength(1_000);
    expect(selection.waiting.map((name) => name.identity)).not.toEqual(forged(1_000));
    expect(selection.waiting.map((name) => name.identity)).not.toEqual(other.waiting.map((name) => name.identity));
  });
});
