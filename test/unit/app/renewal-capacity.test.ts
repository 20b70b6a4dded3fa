/**
 * Whether renewal can keep up with a fleet's expiries (lib/app/renewal-capacity.ts): scheduling
 * with release times (`renewableAt`) and deadlines (expiry less renew.timeout) at the sustained rate,
 * earliest deadline first, and the smallest rate that keeps up.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AdmissionState } from "../../../lib/ports/admission-entry";
import type { HostExpiry } from "../../../lib/admission/site-listing";
import { renewalCapacity, type RenewalCapacitySettings } from "../../../lib/app/renewal-capacity";
import { InvalidRenewalSettingsError } from "../../../lib/errors";
import { renewableAt } from "../../../lib/app/renewal-state";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;
const NOW = Date.UTC(2030, 0, 1);
/** A bound on hosts out of service far above any rate here, so renew.rate is what limits. */
const UNBOUNDED = 1_000_000;

function host(index: number, expiresAt: number, lifetimeMs: number, state: AdmissionState = "provisioned"): HostExpiry {
  return {
    identity: `node-${String(index).padStart(6, "0")}.example.net`,
    state,
    credentials: { expiresAt, issuedAt: expiresAt - lifetimeMs, kind: "server_jwt" },
  };
}

function settings(change: Partial<RenewalCapacitySettings> = {}): RenewalCapacitySettings {
  return { before: { fraction: 0.2 }, ratePerMinute: 10, maxInFlight: UNBOUNDED, timeoutMs: 15 * MINUTE_MS, outOfServiceMs: 15 * MINUTE_MS, ...change };
}

/** 100,000 hosts with 30-day credentials whose expiries fall within one hour, 25 days from now. */
const CLUSTER_START = NOW + 25 * DAY_MS;
const CLUSTER = Array.from({ length: 100_000 }, (_, index) => host(index, CLUSTER_START + Math.floor((index / 100_000) * HOUR_MS), 30 * DAY_MS));
/**
 * Every host of the cluster is in one interval: from the first window's opening (20% of 30 days = 6
 * days before the first expiry) to the last send-by (the last expiry less 15 minutes).
 */
const CLUSTER_INTERVAL_MINUTES = 6 * 24 * 60 + 60 - 15;
const CLUSTER_ANALYTIC_RATE = 100_000 / CLUSTER_INTERVAL_MINUTES;

describe("renewal capacity", () => {
  it("keeps up with expiries spread evenly over the credentials' lifetime, at the default rate and bound", () => {
    // Arrange: 10,000 hosts, one expiring every ~4 minutes from 2 days on: those within 6 days are
    // due at once, none is in the last quarter (1.5 days) of its window yet.
    const hosts = Array.from({ length: 10_000 }, (_, index) => host(index, NOW + 2 * DAY_MS + Math.floor((index / 10_000) * 30 * DAY_MS), 30 * DAY_MS));

    // Act
    const capacity = renewalCapacity(hosts, NOW, settings({ maxInFlight: 50 }));

    // Assert: 50 hosts out for 15 minutes at worst is 3.33 a minute, which is plenty for 1 needed.
    expect(capacity).toMatchObject({
      canKeepUp: true,
      hostsToRenew: 10_000,
      limitedBy: "renew.max_in_flight",
      requiredRatePerMinute: 1,
      shortfallPerMinute: 0,
      hostsThatWouldExpire: 0,
      hostsOutOfReach: 0,
      hostsAtRisk: 0,
    });
    expect(capacity.ratePerMinute).toBeCloseTo(50 / 15, 10);
    expect(capacity.firstMissAt).toBeUndefined();
  });

  it("says 100,000 hosts of 30-day credentials expiring within one hour cannot be renewed at 10 a minute, and by how much", () => {
    // Act
    const capacity = renewalCapacity(CLUSTER, NOW, settings({ ratePerMinute: 10 }));

    // Assert: 100,000 sends in 8,685 minutes is 11.51 a minute, so 12.
    expect(CLUSTER_ANALYTIC_RATE).toBeCloseTo(11.51, 2);
    expect(capacity.canKeepUp).toBe(false);
    expect(capacity.requiredRatePerMinute).toBe(Math.ceil(CLUSTER_ANALYTIC_RATE));
    expect(capacity.requiredRatePerMinute).toBe(12);
    expect(capacity.requiredMaxInFlight).toBe(12 * 15);
    expect(capacity.ratePerMinute).toBe(10);
    expect(capacity.limitedBy).toBe("renew.rate");
    expect(capacity.shortfallPerMinute).toBe(capacity.requiredRatePerMinute - 10);
    // 10 a minute over the interval sends 86,850 of them: the rest miss their send-by instant.
    expect(capacity.hostsThatWouldExpire).toBeGreaterThanOrEqual(100_000 - 10 * CLUSTER_INTERVAL_MINUTES);
    expect(capacity.hostsOutOfReach).toBe(0);
    expect(capacity.firstMissAt).toBeGreaterThan(CLUSTER_START - 15 * MINUTE_MS);
    expect(capacity.firstMissAt).toBeLessThan(CLUSTER_START + HOUR_MS - 15 * MINUTE_MS);
    const missed = CLUSTER.find((candidate) => candidate.identity === capacity.firstMissIdentity);
    expect(missed && missed.credentials.expiresAt - 15 * MINUTE_MS).toBe(capacity.firstMissAt);
  });

  it.each([12, 24])("keeps up with the same 100,000 hosts at %i a minute", (ratePerMinute) => {
    // Act
    const capacity = renewalCapacity(CLUSTER, NOW, settings({ ratePerMinute }));

    // Assert
    expect(capacity).toMatchObject({ canKeepUp: true, requiredRatePerMinute: 12, shortfallPerMinute: 0, hostsThatWouldExpire: 0, hostsToRenew: 100_000 });
  });

  it("takes the bound on hosts out of service as the limit when it allows fewer sends than the rate", () => {
    // Arrange: 10,000 hosts whose windows (4 h) all open now and close over the next hour.
    const hosts = Array.from({ length: 10_000 }, (_, index) => host(index, NOW + 3 * HOUR_MS + Math.floor((index / 10_000) * HOUR_MS), 30 * DAY_MS));
    const before = { ms: 4 * HOUR_MS };

    // Act: rate 100 a minute, but 50 hosts each out for up to 15 minutes is 3.33 a minute.
    const bound = renewalCapacity(hosts, NOW, settings({ before, ratePerMinute: 100, maxInFlight: 50 }));
    const enough = renewalCapacity(hosts, NOW, settings({ before, ratePerMinute: 100, maxInFlight: bound.requiredMaxInFlight }));

    // Assert: 10,000 sends by the last send-by (3 h 45 min from now) need 45 a minute.
    expect(bound.limitedBy).toBe("renew.max_in_flight");
    expect(bound.ratePerMinute).toBeCloseTo(50 / 15, 10);
    expect(bound.canKeepUp).toBe(false);
    expect(bound.requiredRatePerMinute).toBe(45);
    expect(bound.shortfallPerMinute).toBe(41.67);
    expect(bound.requiredMaxInFlight).toBe(45 * 15);
    expect(enough).toMatchObject({ canKeepUp: true, limitedBy: "renew.max_in_flight", ratePerMinute: 45, shortfallPerMinute: 0 });
  });

  it("does not count expired hosts, a host being provisioned or hosts in flight as needing renewal; a host re-admitted keeps its credentials and counts", () => {
    // Arrange: 100 hosts due in a 2-hour window that rate 1 a minute renews, plus hosts that would not fit.
    const due = Array.from({ length: 100 }, (_, index) => host(index, NOW + 2 * HOUR_MS, 30 * DAY_MS));
    const expired = Array.from({ length: 1_000 }, (_, index) => host(1_000 + index, NOW - index * MINUTE_MS, 30 * DAY_MS));
    const notProvisioned = (["queued", "provisioning", "failed", "parked"] as const).map((state, index) => host(5_000 + index, NOW + 20 * MINUTE_MS, 30 * DAY_MS, state));
    const inFlight = Array.from({ length: 1_000 }, (_, index) => host(10_000 + index, NOW + 20 * MINUTE_MS, 30 * DAY_MS));

    // Act
    const capacity = renewalCapacity([...due, ...expired, ...notProvisioned, ...inFlight], NOW, settings({ before: { ms: 2 * HOUR_MS }, ratePerMinute: 1 }), new Set(inFlight.map((h) => h.identity)));

    // Assert: the in-flight hosts and the four others are past three quarters of their window: at risk;
    // the queued, failed and parked ones are still to be sent, the one being provisioned is not.
    expect(capacity).toMatchObject({ canKeepUp: true, hostsToRenew: 103, requiredRatePerMinute: 1, hostsThatWouldExpire: 0, hostsAtRisk: 1_004 });
  });

  it("says a host whose send-by instant has passed, or comes before its window lets it go, is out of reach at any rate", () => {
    // Arrange: credentials that expire in 10 minutes with renew.timeout 15 minutes.
    const late = host(1, NOW + 10 * MINUTE_MS, 30 * DAY_MS);
    const fine = host(2, NOW + 10 * DAY_MS, 30 * DAY_MS);

    // Act
    const capacity = renewalCapacity([late, fine], NOW, settings());

    // Assert: no rate helps, so the shortfall gauge stays 0 and the at-risk gauge says it.
    expect(capacity).toMatchObject({
      canKeepUp: false,
      hostsOutOfReach: 1,
      hostsThatWouldExpire: 1,
      shortfallPerMinute: 0,
      requiredRatePerMinute: 1,
      firstMissAt: late.credentials.expiresAt - 15 * MINUTE_MS,
      firstMissIdentity: late.identity,
      hostsAtRisk: 1,
    });
  });

  it("says nothing is needed for a fleet with nothing to renew", () => {
    expect(renewalCapacity([], NOW, settings())).toMatchObject({ canKeepUp: true, hostsToRenew: 0, requiredRatePerMinute: 0, requiredMaxInFlight: 0, shortfallPerMinute: 0 });
  });

  it.each([
    ["ratePerMinute", { ratePerMinute: 0 }],
    ["maxInFlight", { maxInFlight: -1 }],
    ["timeoutMs", { timeoutMs: Number.NaN }],
    ["before", { before: { fraction: 0 } }],
  ])("refuses a %s that is not positive, naming it", (name, change) => {
    expect(() => renewalCapacity(CLUSTER.slice(0, 10), NOW, settings(change))).toThrow(InvalidRenewalSettingsError);
    expect(() => renewalCapacity(CLUSTER.slice(0, 10), NOW, settings(change))).toThrow(name);
  });
});

describe("hosts at risk", () => {
  it("counts hosts not expired yet in the last quarter of their window, whatever their admission state", () => {
    // Arrange: a 4-hour window; its last quarter is the last hour before expiry.
    const before = { ms: 4 * HOUR_MS };
    const hosts = [
      host(1, NOW + 61 * MINUTE_MS, DAY_MS),
      host(2, NOW + 60 * MINUTE_MS, DAY_MS),
      host(3, NOW + 1, DAY_MS),
      host(4, NOW, DAY_MS),
      host(5, NOW + 30 * MINUTE_MS, DAY_MS, "failed"),
    ];

    // Act & Assert: hosts 2, 3 and 5.
    expect(renewalCapacity(hosts, NOW, settings({ before })).hostsAtRisk).toBe(3);
    // 20% of a 10-hour lifetime is 2 hours: the last 30 minutes.
    expect(renewalCapacity([host(6, NOW + 30 * MINUTE_MS, 10 * HOUR_MS), host(7, NOW + 31 * MINUTE_MS, 10 * HOUR_MS)], NOW, settings({ before: { fraction: 0.2 } })).hostsAtRisk).toBe(1);
  });
});

/**
 * A small random fleet and settings, for the properties: a few groups of hosts provisioned
 * together (one expiry, or expiries spread over up to two hours), with windows short enough that
 * rates above 1 a minute are needed, and often hosts no rate can reach.
 */
const fleetArbitrary = fc.record({
  groups: fc.array(
    fc.record({
      inMinutes: fc.integer({ min: 1, max: 10 * 60 }),
      hosts: fc.integer({ min: 1, max: 40 }),
      spreadMinutes: fc.integer({ min: 0, max: 120 }),
      lifetimeMinutes: fc.integer({ min: 60, max: 24 * 60 }),
    }),
    { minLength: 1, maxLength: 5 },
  ),
  before: fc.oneof(fc.record({ ms: fc.integer({ min: 2, max: 90 }).map((minutes) => minutes * MINUTE_MS) }), fc.record({ fraction: fc.double({ min: 0.01, max: 0.2, noNaN: true }) })),
  timeoutMinutes: fc.integer({ min: 1, max: 20 }),
  offsetMs: fc.integer({ min: 0, max: MINUTE_MS - 1 }),
});
type Fleet = typeof fleetArbitrary extends fc.Arbitrary<infer T> ? T : never;

function fleetOf(fleet: Fleet): HostExpiry[] {
  let index = 0;
  return fleet.groups.flatMap((group) =>
    Array.from({ length: group.hosts }, (_, member) => {
      const expiresAt = NOW + fleet.offsetMs + (group.inMinutes + Math.floor((member / group.hosts) * group.spreadMinutes)) * MINUTE_MS;
      return host(index++, expiresAt, group.lifetimeMinutes * MINUTE_MS);
    }),
  );
}

/** The densest interval by brute force: max over ticks a <= b of ceil(#jobs released at or after a with deadline at or before b / (b - a + 1)). */
function densestRate(hosts: readonly HostExpiry[], base: RenewalCapacitySettings): number {
  const jobs = hosts
    .map((h) => ({
      release: Math.max(0, Math.ceil((renewableAt(h, base.before) - NOW) / MINUTE_MS)),
      deadline: Math.floor((h.credentials.expiresAt - base.timeoutMs - NOW) / MINUTE_MS),
    }))
    .filter((job) => job.deadline >= job.release);
  let densest = 0;
  for (const start of new Set(jobs.map((job) => job.release))) {
    const deadlines = jobs.filter((job) => job.release >= start).map((job) => job.deadline).sort((a, b) => a - b);
    deadlines.forEach((end, index) => (densest = Math.max(densest, Math.ceil((index + 1) / (end - start + 1)))));
  }
  return densest;
}

describe("the required rate", () => {
  it("is a rate at which the schedule misses nothing, and one less misses something", () => {
    fc.assert(
      fc.property(fleetArbitrary, (fleet) => {
        const hosts = fleetOf(fleet);
        const base = settings({ before: fleet.before, timeoutMs: fleet.timeoutMinutes * MINUTE_MS });
        const { requiredRatePerMinute: required, hostsOutOfReach } = renewalCapacity(hosts, NOW, base);

        const at = renewalCapacity(hosts, NOW, { ...base, ratePerMinute: Math.max(required, 1) });
        expect(at.hostsThatWouldExpire).toBe(hostsOutOfReach);
        expect(at.shortfallPerMinute).toBe(0);
        if (required > 1) {
          const below = renewalCapacity(hosts, NOW, { ...base, ratePerMinute: required - 1 });
          expect(below.hostsThatWouldExpire).toBeGreaterThan(hostsOutOfReach);
          expect(below.shortfallPerMinute).toBe(1);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("is the densest interval of release and send-by ticks, rounded up", () => {
    fc.assert(
      fc.property(fleetArbitrary, (fleet) => {
        const hosts = fleetOf(fleet);
        const base = settings({ before: fleet.before, timeoutMs: fleet.timeoutMinutes * MINUTE_MS });

        expect(renewalCapacity(hosts, NOW, base).requiredRatePerMinute).toBe(densestRate(hosts, base));
      }),
      { numRuns: 300 },
    );
  });
});
