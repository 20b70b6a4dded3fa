/** Small wordings every printer of the CLI shares. */

export const plural = (count: number, one: string) => `${count} ${one}${count === 1 ? "" : "s"}`;

/** How long ago `at` was, as a person reads it: seconds, then minutes, then hours. */
export function ago(now: number, at: number | undefined): string {
  if (at === undefined || at === 0) return "-";
  const seconds = Math.round((now - at) / 1000);
  return seconds < 120 ? `${seconds}s ago` : seconds < 7_200 ? `${Math.round(seconds / 60)}m ago` : `${Math.round(seconds / 3_600)}h ago`;
}
