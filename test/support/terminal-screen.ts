/**
 * What a terminal of `width` columns shows after receiving `output`: enough of a VT100 to judge the
 * local run's live line. Printable text fills the row and wraps at the last column (as a terminal
 * with auto-wrap does), "\r" returns to the row's start, "\n" to the next row's start (as the tty's
 * onlcr makes it), ESC[2K clears the row, ESC[K / ESC[0K clear to its end, ESC[nG moves to column n;
 * other escape sequences are skipped.
 */
export interface TerminalScreen {
  /** Every row from the first, as the terminal shows them at the end (trailing blanks dropped). */
  rows: string[];
  /** The text of every row that overflowed its width and went on in the next row, as it stood when it wrapped. */
  wrapped: string[];
}

export function renderTerminal(output: string, width: number): TerminalScreen {
  const rows: string[][] = [[]];
  const wrapped: string[] = [];
  let row = 0;
  let column = 0;
  const current = () => (rows[row] ??= []);
  const newRow = () => {
    row++;
    rows[row] ??= [];
  };
  for (let index = 0; index < output.length; index++) {
    const char = output[index] as string;
    if (char === "\x1b") {
      // eslint-disable-next-line no-control-regex -- an escape sequence starts with the ESC control character
      const sequence = /^\x1b\[([0-9;?]*)([A-Za-z])/.exec(output.slice(index));
      if (!sequence) continue;
      index += sequence[0].length - 1;
      const [, argument, command] = sequence;
      if (command === "K" && argument === "2") rows[row] = [];
      else if (command === "K") current().length = Math.min(current().length, column);
      else if (command === "G") column = Math.max(0, Number(argument || "1") - 1);
      continue;
    }
    if (char === "\r") column = 0;
    else if (char === "\n") {
      newRow();
      column = 0;
    }
    else if (char >= " ") {
      if (column >= width) {
        wrapped.push(current().join(""));
        newRow();
        column = 0;
      }
      const cells = current();
      while (cells.length < column) cells.push(" ");
      cells[column] = char;
      column++;
    }
  }
  return { rows: rows.map((cells) => cells.join("").trimEnd()), wrapped };
}
