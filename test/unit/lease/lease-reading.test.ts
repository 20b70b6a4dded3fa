import { describe, expect, it } from "vitest";
import { describeLease, leadsAt } from "../../../lib/lease/stored-lease";
import type { LeaseItem } from "../../../lib/ports/lease-store";

const NOW = 1_700_000_000_000;
const held: LeaseItem = { site: "lab", holder: "east", term: 4, expiresAt: NOW + 10_000 };

describe("reading a stored lease (lib/lease is the only place that knows its shape)", () => {
  it("a deployment leads while it holds the lease and its expiry, less the skew bound, is ahead", () => {
    expect(leadsAt(held, "east", NOW)).toBe(true);
    expect(leadsAt(held, "east", NOW, 9_999)).toBe(true);
    expect(leadsAt(held, "east", NOW, 10_000)).toBe(false);
    expect(leadsAt(held, "west", NOW)).toBe(false);
    expect(leadsAt(held, "east", NOW + 10_000)).toBe(false);
  });

  it("nobody leads on a released lease, an old item's expiry of 0, or no lease at all", () => {
    expect(leadsAt({ ...held, released: true }, "east", NOW)).toBe(false);
    expect(leadsAt({ ...held, expiresAt: 0 }, "east", 0 - 1)).toBe(false);
    expect(leadsAt(undefined, "east", NOW)).toBe(false);
  });

  it("describes a held lease with its leader, and a released one without", () => {
    expect(describeLease(held, "east", NOW)).toEqual({ leader: "east", term: 4, expiresAt: NOW + 10_000, heldByThisDeployment: true });
    expect(describeLease(held, "west", NOW + 20_000)).toEqual({ leader: "east", term: 4, expiresAt: NOW + 10_000, heldByThisDeployment: false });
    expect(describeLease({ ...held, released: true }, "east", NOW)).toEqual({ leader: null, term: 4, expiresAt: null, heldByThisDeployment: false });
  });
});
