/** One unit of queued host work, the data every queue of hosts carries. */

/** Where a host's admission came from. */
export type AdmissionSource = "discovery" | "event" | "operator";

/** One unit of queued host work. `term` is the fencing token it was admitted under. */
export interface HostWork {
  identity: string;
  term: number;
  /** Wall-clock epoch ms of admission; work older than 2 x interval is skipped. */
  admittedAt: number;
  source: AdmissionSource;
}
