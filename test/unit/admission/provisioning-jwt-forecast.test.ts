/** The bootstrap expiry forecast (docs/audit.md): how the provisioning JWTs a site's hosts presented are counted, at the window's edges. */
import { describe, expect, it } from "vitest";
import { provisioningJwtForecast } from "../../../lib/admission/site-listing";
import type { AdmissionSummaryRow } from "../../../lib/ports/admission-entry";

const NOW = Date.parse("2026-06-01T00:00:00Z");
const DAY_MS = 24 * 3_600_000;
const WINDOW_MS = 30 * DAY_MS;

function host(identity: string, presented?: { issuer: string; expiresAt: number }): AdmissionSummaryRow {
  return { identity, term: 1, state: "provisioned", ...(presented ? { provisioningJwtIssuer: presented.issuer, provisioningJwtExpiresAt: presented.expiresAt } : {}) };
}

describe("the provisioning JWT forecast", () => {
  it("counts a token expiring at now as expired (accepted only while now < exp), and one at the window's end as expiring", () => {
    // Arrange
    const rows = [
      host("at-now", { issuer: "image", expiresAt: NOW }),
      host("just-ahead", { issuer: "image", expiresAt: NOW + 1 }),
      host("window-end", { issuer: "image", expiresAt: NOW + WINDOW_MS }),
      host("past-window", { issuer: "image", expiresAt: NOW + WINDOW_MS + 1 }),
    ];

    // Act
    const forecast = provisioningJwtForecast(rows, NOW, WINDOW_MS);

    // Assert
    expect(forecast).toEqual({
      windowMs: WINDOW_MS,
      expiring: 2,
      expired: 1,
      issuers: [{ issuer: "image", hosts: 4, expiring: 2, expired: 1, nextExpiresAt: NOW + 1 }],
    });
  });

  it("keeps issuers apart, lists those with an expired token first and then the soonest to expire, and leaves hosts without a record out", () => {
    // Arrange
    const rows = [
      host("a", { issuer: "image-2026", expiresAt: NOW + 200 * DAY_MS }),
      host("b", { issuer: "image-2025", expiresAt: NOW + 10 * DAY_MS }),
      host("c", { issuer: "image-2025", expiresAt: NOW + 12 * DAY_MS }),
      host("d", { issuer: "", expiresAt: NOW - DAY_MS }),
      host("e"),
    ];

    // Act
    const forecast = provisioningJwtForecast(rows, NOW, WINDOW_MS);

    // Assert
    expect(forecast.issuers).toEqual([
      { issuer: "", hosts: 1, expiring: 0, expired: 1 },
      { issuer: "image-2025", hosts: 2, expiring: 2, expired: 0, nextExpiresAt: NOW + 10 * DAY_MS },
      { issuer: "image-2026", hosts: 1, expiring: 0, expired: 0, nextExpiresAt: NOW + 200 * DAY_MS },
    ]);
    expect([forecast.expiring, forecast.expired]).toEqual([2, 1]);
  });

  it("follows the window it is given", () => {
    // Arrange
    const rows = [host("a", { issuer: "image", expiresAt: NOW + 45 * DAY_MS })];

    // Act
    const [thirty, sixty] = [provisioningJwtForecast(rows, NOW, WINDOW_MS), provisioningJwtForecast(rows, NOW, 60 * DAY_MS)];

    // Assert
    expect([thirty.expiring, sixty.expiring]).toEqual([0, 1]);
  });
});
