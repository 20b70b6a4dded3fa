import { goDuration } from "./go-duration";

/**
 * The Go daemon's waiting limit (host.go `isCurrent`): work admitted more than 2 x `interval` ago
 * is skipped, not provisioned. Returns the reason, worded as Go logs it, or undefined while the
 * work is current. The registry checks it before claiming, the engine again before provisioning.
 */
export function waitedTooLong(admittedAt: number, now: number, intervalMs: number): string | undefined {
  const waitedMs = now - admittedAt;
  return waitedMs > 2 * intervalMs ? `skipping node that's been waiting ${goDuration(waitedMs)}` : undefined;
}
