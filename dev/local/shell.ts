/** POSIX shell single quoting: the value comes back byte for byte from `source` or `eval`, newlines included. */
function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** `export NAME='value'` lines a shell can source (the local run's .env files and its --keep-running block). */
export function exportLines(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => `export ${name}=${shellQuote(value)}\n`)
    .join("");
}
