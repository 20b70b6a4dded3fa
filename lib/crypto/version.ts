/** Package versions compared the rpm way (docs/protocol.md §9.9); the provisioner upgrades iff not equal. */

interface ParsedVersion {
  epoch: number;
  version: string;
  release: string;
}

const SEGMENT = /[a-zA-Z]+|[0-9]+|~/g;

function parseVersion(text: string): ParsedVersion {
  let rest = text;
  let epoch = 0;
  const colon = text.indexOf(":");
  if (colon >= 0) {
    const epochText = text.slice(0, colon).trimStart();
    // Go's strconv.Atoi: optional sign then decimal digits only, otherwise the epoch is 0.
    epoch = /^[+-]?[0-9]+$/.test(epochText) ? Number.parseInt(epochText, 10) : 0;
    rest = text.slice(colon + 1);
  }
  const dash = rest.indexOf("-");
  return dash >= 0
    ? { epoch, version: rest.slice(0, dash), release: rest.slice(dash + 1) }
    : { epoch, version: rest, release: "" };
}

function isDigit(segment: string): boolean {
  return segment.charCodeAt(0) >= 48 && segment.charCodeAt(0) <= 57;
}

function byteCompare(a: string, b: string): -1 | 0 | 1 {
  if (a < b) return -1;
  return a > b ? 1 : 0;
}

/** rpmvercmp over one version or release string. */
function rpmvercmp(a: string, b: string): -1 | 0 | 1 {
  if (a === b) return 0;
  const segmentsA = a.match(SEGMENT) ?? [];
  const segmentsB = b.match(SEGMENT) ?? [];
  const common = Math.min(segmentsA.length, segmentsB.length);
  for (let index = 0; index < common; index++) {
    let left = segmentsA[index] as string;
    let right = segmentsB[index] as string;
    if (left === "~" || right === "~") {
      if (left !== "~") return 1;
      if (right !== "~") return -1;
    }
    if (isDigit(left)) {
      if (!isDigit(right)) return 1;
      left = left.replace(/^0+/, "");
      right = right.replace(/^0+/, "");
      if (left.length !== right.length) return left.length > right.length ? 1 : -1;
    } else if (isDigit(right)) {
      return -1;
    }
    const order = byteCompare(left, right);
    if (order !== 0) return order;
  }
  if (segmentsA.length === segmentsB.length) return 0;
  if (segmentsA.length > common && segmentsA[common] === "~") return -1;
  if (segmentsB.length > common && segmentsB[common] === "~") return 1;
  return segmentsA.length > segmentsB.length ? 1 : -1;
}

/** Compares `epoch:version-release` strings: epoch, then rpmvercmp of version, then of release. */
export function compareVersions(a: string, b: string): -1 | 0 | 1 {
  const left = parseVersion(a);
  const right = parseVersion(b);
  if (left.epoch === right.epoch && left.version === right.version && left.release === right.release) return 0;
  if (left.epoch !== right.epoch) return left.epoch > right.epoch ? 1 : -1;
  return rpmvercmp(left.version, right.version) || rpmvercmp(left.release, right.release);
}
