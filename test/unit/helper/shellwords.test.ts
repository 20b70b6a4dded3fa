import { describe, expect, it } from "vitest";
import { HelperError } from "../../../lib/errors";
import { splitCommandLine } from "../../../lib/helper/shellwords";

describe("splitCommandLine", () => {
  it.each<[string, string[]]>([
    ["/usr/bin/helper", ["/usr/bin/helper"]],
    ["  helper   --a  b ", ["helper", "--a", "b"]],
    ["helper 'two words' x", ["helper", "two words", "x"]],
    ['helper "two words" x', ["helper", "two words", "x"]],
    ['helper "say \\"hi\\"" \'it\'\'s\'', ["helper", 'say "hi"', "its"]],
    ["helper a\\ b", ["helper", "a b"]],
    ['helper "a\\nb"', ["helper", "a\\nb"]],
    ['helper "$HOME" \'$HOME\'', ["helper", "$HOME", "$HOME"]],
    ["helper one\\\ntwo", ["helper", "onetwo"]],
    ["helper ''", ["helper", ""]],
    ['helper pre"mid"post', ["helper", "premidpost"]],
    ["", []],
  ])("%j", (line, expected) => {
    // Act
    const words = splitCommandLine(line);

    // Assert
    expect(words).toEqual(expected);
  });

  it.each(["helper 'open", 'helper "open', "helper trailing\\"])("rejects %j", (line) => {
    // Act
    const split = () => splitCommandLine(line);

    // Assert
    expect(split).toThrow(HelperError);
  });
});
