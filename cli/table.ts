/**
 * The tables the CLI prints for people, boxed the way the Choria CLI boxes its own (go-choria's
 * UTF-8 tables: rounded corners, an optional centred title, the header ruled off from the rows, one
 * space of padding in every cell), so the two tools read alike side by side.
 */

export interface BoxTable {
  /** A centred row above the header. */
  title?: string;
  headers: readonly string[];
  rows: ReadonlyArray<readonly string[]>;
}

/** Columns as a terminal counts them: one per code point (the box characters are one each). */
const widthOf = (text: string) => [...text].length;

/** A cell is one line: a line break inside one would break the box. */
const cellText = (text: string) => text.replace(/\s*\n\s*/g, " ");

export function boxTable({ title, headers, rows }: BoxTable): string {
  const cells = rows.map((row) => headers.map((_, column) => cellText(row[column] ?? "")));
  const widths = headers.map((header, column) => Math.max(widthOf(header), ...cells.map((row) => widthOf(row[column] ?? ""))));
  // Each column is its text plus a space either side; the columns are joined by one rule each.
  let inner = widths.reduce((sum, width) => sum + width + 3, -1);
  if (title !== undefined && widthOf(title) + 2 > inner) {
    widths[widths.length - 1] = (widths.at(-1) ?? 0) + widthOf(title) + 2 - inner;
    inner = widthOf(title) + 2;
  }
  const rule = (left: string, join: string, right: string) => `${left}${widths.map((width) => "─".repeat(width + 2)).join(join)}${right}`;
  const line = (row: readonly string[]) => `│${row.map((cell, column) => ` ${cell}${" ".repeat((widths[column] ?? 0) - widthOf(cell))} `).join("│")}│`;
  const lines: string[] = [];
  if (title === undefined) lines.push(rule("╭", "┬", "╮"));
  else {
    const space = inner - widthOf(title);
    const left = Math.floor(space / 2);
    lines.push(`╭${"─".repeat(inner)}╮`, `│${" ".repeat(left)}${title}${" ".repeat(space - left)}│`, rule("├", "┬", "┤"));
  }
  lines.push(line(headers), rule("├", "┼", "┤"), ...cells.map(line), rule("╰", "┴", "╯"));
  return lines.join("\n");
}
