import { describe, expect, it } from "vitest";
import { agentFilter, type Filter } from "../../../lib/choria/filter";
import { parseFilter, matchesFilter } from "../../support/choria-node/filter";

const node = {
  identity: "web1.example.net",
  agents: ["choria_provision", "choria_util", "discovery", "rpcutil"],
  classes: ["role::web"],
  facts: { os: "linux", cores: 8, nested: { a: 1 } },
};
const empty: Filter = { fact: [], cf_class: [], agent: [], identity: [], compound: [] };

describe("matchesFilter", () => {
  it("matches everything with an empty filter", () => {
    expect(matchesFilter(empty, node)).toBe(true);
  });

  it("ANDs agent entries, exact or /regex/", () => {
    expect(matchesFilter(agentFilter("choria_provision"), node)).toBe(true);
    expect(matchesFilter({ ...empty, agent: ["rpcutil", "choria_provision"] }, node)).toBe(true);
    expect(matchesFilter({ ...empty, agent: ["rpcutil", "puppet"] }, node)).toBe(false);
    expect(matchesFilter({ ...empty, agent: ["/^choria_/"] }, node)).toBe(true);
    expect(matchesFilter({ ...empty, agent: ["choria"] }, node)).toBe(false);
  });

  it("ORs identity entries; /regex/ searches unanchored, plain text needs equality", () => {
    expect(matchesFilter({ ...empty, identity: ["db1.example.net", "web1.example.net"] }, node)).toBe(true);
    expect(matchesFilter({ ...empty, identity: ["/web\\d/"] }, node)).toBe(true);
    expect(matchesFilter({ ...empty, identity: ["web1"] }, node)).toBe(false);
    expect(matchesFilter({ ...empty, identity: ["/db/"] }, node)).toBe(false);
  });

  it("ANDs categories", () => {
    expect(matchesFilter({ ...agentFilter("rpcutil"), identity: ["other"] }, node)).toBe(false);
    expect(matchesFilter({ ...agentFilter("rpcutil"), identity: ["/web/"], cf_class: ["role::web"] }, node)).toBe(true);
    expect(matchesFilter({ ...empty, cf_class: ["role::db"] }, node)).toBe(false);
  });

  it.each([
    ["os", "==", "linux", true],
    ["os", "!=", "linux", false],
    ["os", "=~", "/^lin/", true],
    ["os", "=~", "ux$", true],
    ["os", "=~", "/([/", false],
    ["cores", ">=", "8", true],
    ["cores", ">", "10", false],
    ["cores", "<", "10", true],
    ["cores", "<=", "7", false],
    ["cores", "==", "8.0", true],
    ["missing", "==", "x", false],
    ["os", "<>", "linux", false],
  ])("fact %s %s %s -> %s", (fact, operator, value, expected) => {
    expect(matchesFilter({ ...empty, fact: [{ fact, operator, value }] }, node)).toBe(expected);
  });

  it("never matches a compound filter it cannot evaluate", () => {
    expect(matchesFilter({ ...empty, compound: [[{ expr: "true" }]] }, node)).toBe(false);
  });
});

describe("parseFilter", () => {
  it("requires fact, cf_class, identity and compound arrays, agent optional", () => {
    expect(parseFilter({ fact: [], cf_class: [], identity: [], compound: [] }, true)).toEqual(empty);
    expect(() => parseFilter({ fact: [], cf_class: [], identity: [] }, true)).toThrow(/"compound" must be an array/);
    expect(() => parseFilter(null, true)).toThrow(/must be an object/);
  });

  it("rejects entries of the wrong shape", () => {
    expect(() => parseFilter({ ...empty, identity: [1] }, true)).toThrow(/"identity" must hold strings/);
    expect(() => parseFilter({ ...empty, fact: [{ fact: "a" }] }, true)).toThrow(/"fact" entries/);
    expect(() => parseFilter({ ...empty, compound: ["x"] }, true)).toThrow(/"compound" must hold arrays of objects/);
    expect(() => parseFilter({ ...empty, agent: "rpcutil" }, true)).toThrow(/"agent" must be an array/);
  });
});
