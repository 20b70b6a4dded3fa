import { HelperError } from "../errors";

const WHITESPACE = new Set([" ", "\t", "\n"]);
/** Inside double quotes a backslash only escapes these, as in POSIX sh (and go-shellquote). */
const DOUBLE_QUOTE_ESCAPABLE = new Set(["$", "`", '"', "\\", "\n"]);

/**
 * Splits a command line into words the way a POSIX shell would, without running a shell: single
 * quotes are literal, double quotes allow backslash escapes of `$ \` " \` and newline, a backslash
 * outside quotes escapes the next character, and backslash-newline joins lines.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let index = 0;

  while (index < line.length) {
    const char = line.charAt(index);
    if (WHITESPACE.has(char)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      index += 1;
    } else if (char === "\\") {
      const next = line.charAt(index + 1);
      if (index + 1 >= line.length) throw new HelperError("cannot parse helper command: unterminated backslash escape");
      if (next !== "\n") {
        word += next;
        inWord = true;
      }
      index += 2;
    } else if (char === "'") {
      const end = line.indexOf("'", index + 1);
      if (end < 0) throw new HelperError("cannot parse helper command: unterminated single-quoted string");
      word += line.slice(index + 1, end);
      inWord = true;
      index = end + 1;
    } else if (char === '"') {
      index += 1;
      let closed = false;
      while (index < line.length) {
        const inner = line.charAt(index);
        if (inner === '"') {
          closed = true;
          index += 1;
          break;
        }
        if (inner === "\\" && DOUBLE_QUOTE_ESCAPABLE.has(line.charAt(index + 1))) {
          if (line.charAt(index + 1) !== "\n") word += line.charAt(index + 1);
          index += 2;
          continue;
        }
        word += inner;
        index += 1;
      }
      if (!closed) throw new HelperError("cannot parse helper command: unterminated double-quoted string");
      inWord = true;
    } else {
      word += char;
      inWord = true;
      index += 1;
    }
  }
  if (inWord) words.push(word);
  return words;
}
