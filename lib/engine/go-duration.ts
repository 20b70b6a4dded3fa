/**
 * A duration printed as Go's `time.Duration.String()` prints it (`%v` in the Go daemon's and the
 * node's messages): `0s`, `999ns`, `1.5µs`, `250ms`, `1.5s`, `1m0s`, `2m5.3s`, `25h1m1.001s`; the
 * fraction has no trailing zeros. Counted in whole nanoseconds as Go does (BigInt: a year of
 * nanoseconds is beyond a double's exact integers).
 */
export function goDuration(ms: number): string {
  const ns = BigInt(Math.round(ms * 1e6));
  if (ns === 0n) return "0s";
  const sign = ns < 0n ? "-" : "";
  const abs = ns < 0n ? -ns : ns;
  if (abs < 1_000n) return `${sign}${abs}ns`;
  if (abs < 1_000_000n) return `${sign}${fraction(abs, 3)}µs`;
  if (abs < 1_000_000_000n) return `${sign}${fraction(abs, 6)}ms`;
  const hours = abs / 3_600_000_000_000n;
  const minutes = (abs / 60_000_000_000n) % 60n;
  const seconds = `${fraction(abs % 60_000_000_000n, 9)}s`;
  if (hours > 0n) return `${sign}${hours}h${minutes}m${seconds}`;
  if (minutes > 0n) return `${sign}${minutes}m${seconds}`;
  return `${sign}${seconds}`;
}

/** `value / 10^digits` with the fraction's trailing zeros (and a bare point) left out, as Go's fmtFrac. */
function fraction(value: bigint, digits: number): string {
  const scale = 10n ** BigInt(digits);
  const decimals = (value % scale).toString().padStart(digits, "0").replace(/0+$/, "");
  return decimals === "" ? `${value / scale}` : `${value / scale}.${decimals}`;
}
