import { describe, expect, it } from "vitest";
import { selectDiscovered } from "../../../lib/app/discovery-selection";

const forged = (count: number) => Array.from({ length: count }, (_, index) => `forged-${index}.example.net`);

describe("selectDiscovered", () => {
  it("puts known names first even when a flood of new names arrived before them", () => {
    // Arrange
    const names = [...forged(12_004), "web1.example.net", "web2.example.net", "web3.example.net"];
    const known = new Set(["web3.example.net", "web1.example.net", "web2.example.net"]);

    // Act
    const selection = selectDiscovered(names, known, 100, 10);

    // Assert
    expect(selection.selected.slice(0, 3)).toEqual(["web1.example.net", "web2.example.net", "web3.example.net"]);
    expect(selection.selected.slice(3)).toEqual(forged(10));
    expect(selection).toMatchObject({ droppedOverBudget: 12_004 - 10, droppedOverCap: 0 });
  });

  it("admits new names up to the budget, in the order first seen, once each", () => {
    // Act
    const selection = selectDiscovered(["a", "b", "a", "c", "d"], new Set(), 100, 3);

    // Assert
    expect(selection).toEqual({ selected: ["a", "b", "c"], droppedOverBudget: 1, droppedOverCap: 0 });
  });

  it("bounds known and new names together by the cap, known ones taking the room first", () => {
    // Arrange
    const known = new Set(["k1", "k2", "k3"]);

    // Act
    const roomForOneNew = selectDiscovered(["n1", "k1", "n2", "k2"], known, 3, 10);
    const knownOverCap = selectDiscovered(["k1", "k2", "k3", "n1"], known, 2, 10);

    // Assert
    expect(roomForOneNew).toEqual({ selected: ["k1", "k2", "n1"], droppedOverBudget: 1, droppedOverCap: 0 });
    expect(knownOverCap).toEqual({ selected: ["k1", "k2"], droppedOverBudget: 1, droppedOverCap: 1 });
  });
});
