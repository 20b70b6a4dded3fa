/** The CLI's tables are boxed as the Choria CLI boxes its own (go-choria's UTF-8 tables). */
import { describe, expect, it } from "vitest";
import { boxTable } from "../../../cli/table";

describe("boxTable", () => {
  it("draws rounded corners, rules the header off and pads every cell by one space", () => {
    const table = boxTable({ headers: ["queue", "visible"], rows: [["host work", "1"], ["lifecycle DLQ", "12"]] });

    expect(table).toBe(
      [
        "╭───────────────┬─────────╮",
        "│ queue         │ visible │",
        "├───────────────┼─────────┤",
        "│ host work     │ 1       │",
        "│ lifecycle DLQ │ 12      │",
        "╰───────────────┴─────────╯",
      ].join("\n"),
    );
  });

  it("centres a title above the header, widening the last column for a long one", () => {
    const table = boxTable({ title: "renewal failed, tried again", headers: ["host", "tries"], rows: [["a.example.net", "2"]] });

    expect(table).toBe(
      [
        "╭─────────────────────────────╮",
        "│ renewal failed, tried again │",
        "├───────────────┬─────────────┤",
        "│ host          │ tries       │",
        "├───────────────┼─────────────┤",
        "│ a.example.net │ 2           │",
        "╰───────────────┴─────────────╯",
      ].join("\n"),
    );
  });

  it("keeps a multi-line cell on one line and missing cells empty", () => {
    const table = boxTable({ title: "x", headers: ["host", "error"], rows: [["a", "line one\n  line two"], ["b"]] });

    expect(table.split("\n")).toEqual([
      "╭──────────────────────────╮",
      "│            x             │",
      "├──────┬───────────────────┤",
      "│ host │ error             │",
      "├──────┼───────────────────┤",
      "│ a    │ line one line two │",
      "│ b    │                   │",
      "╰──────┴───────────────────╯",
    ]);
  });
});
