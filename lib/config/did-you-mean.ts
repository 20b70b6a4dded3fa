/**
 * The known key an unknown one was most likely meant to be (`rpc_tll` for `rpc_ttl`), so the
 * warning about it can say so: the Go daemon ignores an unknown key without a word, and a misspelt
 * key silently leaves its setting at the default.
 */

/**
 * The nearest of `known` within a few edits (one for names of up to four characters, two up to
 * eight, three beyond), compared without case and with `-` and `.` read as `_` so `rpc-ttl` and
 * `lease_duration` find their keys; a tie goes to the earlier candidate, as the key table orders them.
 */
export function nearestKey(unknown: string, known: readonly string[]): string | undefined {
  const wanted = normalized(unknown);
  const allowed = wanted.length <= 4 ? 1 : wanted.length <= 8 ? 2 : 3;
  let best: { key: string; distance: number } | undefined;
  for (const key of known) {
    const distance = editDistance(wanted, normalized(key));
    if (distance <= allowed && (best === undefined || distance < best.distance)) best = { key, distance };
  }
  return best?.key;
}

function normalized(key: string): string {
  return key.toLowerCase().replace(/[-.]/g, "_");
}

/** Insertions, deletions, substitutions and swaps of two neighbours (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    for (let j = 1; j <= b.length; j++) {
      const substitution = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + substitution);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, at(i - 2, j - 2) + 1);
      row[j] = distance;
    }
  }
  return at(a.length, b.length);
}
