/**
 * What the registry keeps of a provisioned host's credentials (when they expire, which one, when
 * they were issued), written once and run against every AdmissionStore like the registry rules.
 */
import { describe, expect, it } from "vitest";
import type { CredentialsExpiry } from "../../../lib/ports/credentials";
import { AdmissionRegistry } from "../../../lib/admission/registry";
import type { AdmissionStore } from "../../../lib/ports/admission-store";
import { RecordingMetrics, VirtualClock } from "../fakes";

const INTERVAL = 60_000;
const DAY_MS = 24 * 3_600_000;

export function describeExpiryRules(storeName: string, makeStore: () => AdmissionStore) {
  describe(`credential expiry in the admission registry on ${storeName}`, () => {
    let siteCounter = 0;
    function setup() {
      // Real time: DynamoDB Local's sweeper deletes entries whose TTL is already past.
      const clock = new VirtualClock(Date.now());
      const store = makeStore();
      const site = `expiry-${Date.now()}-${siteCounter++}`;
      const registry = new AdmissionRegistry({ site, intervalMs: INTERVAL }, { store, metrics: new RecordingMetrics(), clock });
      return { clock, store, site, registry };
    }

    async function provision(registry: AdmissionRegistry, identity: string, credentials?: CredentialsExpiry): Promise<void> {
      const work = await registry.admit(identity, "discovery", 1);
      const begun = await registry.begin(work!, 1);
      if (begun.status !== "claimed") throw new Error(`could not claim ${identity}: ${begun.status}`);
      await registry.complete(begun.claim, "provisioned", credentials);
    }

    it("records the credentials' expiry on a provisioned host and lists it", async () => {
      // Arrange
      const { clock, registry, store, site } = setup();
      const credentials: CredentialsExpiry = { expiresAt: clock.now() + 30 * DAY_MS, kind: "certificate", issuedAt: clock.now() };

      // Act
      await provision(registry, "node-a", credentials);
      await provision(registry, "node-b");

      // Assert
      expect(await registry.expiries()).toEqual([{ identity: "node-a", state: "provisioned", credentials }]);
      expect(await store.read({ site, identity: "node-a" })).toMatchObject({
        credentialsExpireAt: credentials.expiresAt,
        expiryKind: "certificate",
        credentialsIssuedAt: credentials.issuedAt,
      });
    });

    it("keeps a provisioned host until its credentials expire, not only for the provisioned hold", async () => {
      // Arrange
      const { clock, registry, store, site } = setup();
      const expiresAt = clock.now() + 7 * DAY_MS;

      // Act
      await provision(registry, "node-a", { expiresAt, kind: "server_jwt", issuedAt: clock.now() });

      // Assert
      expect((await store.read({ site, identity: "node-a" }))?.expiresAt).toBeGreaterThan(expiresAt);
    });

    it("replaces the expiry when the host is provisioned again, and drops it when the new credentials have none", async () => {
      // Arrange
      const { clock, registry, store, site } = setup();
      await provision(registry, "node-a", { expiresAt: clock.now() + DAY_MS, kind: "server_jwt", issuedAt: clock.now() });
      clock.advance(2 * INTERVAL);
      const renewed: CredentialsExpiry = { expiresAt: clock.now() + 2 * DAY_MS, kind: "certificate", issuedAt: clock.now() };

      // Act
      await provision(registry, "node-a", renewed);
      const afterRenewal = await registry.expiries();
      clock.advance(2 * INTERVAL);
      await provision(registry, "node-a");

      // Assert
      expect(afterRenewal).toEqual([{ identity: "node-a", state: "provisioned", credentials: renewed }]);
      expect(await registry.expiries()).toEqual([]);
      expect(await store.read({ site, identity: "node-a" })).not.toHaveProperty("credentialsExpireAt");
    });

    it("keeps the credentials a host was given across its admission again: the node has them until it is provisioned anew", async () => {
      // Arrange
      const { clock, registry } = setup();
      const credentials: CredentialsExpiry = { expiresAt: clock.now() + DAY_MS, kind: "server_jwt", issuedAt: clock.now() };
      await provision(registry, "node-a", credentials);
      const mark = { attempts: 1, retryAt: clock.now() + 30_000, reason: "no answer", at: clock.now() };
      await registry.markRenewal({ identity: "node-a", credentials }, mark);
      clock.advance(2 * INTERVAL);

      // Act
      const work = await registry.admit("node-a", "event", 2);

      // Assert
      expect(work).toBeDefined();
      expect(await registry.expiries()).toEqual([{ identity: "node-a", state: "queued", credentials, renewal: mark }]);
      expect(await registry.credentialsOf("node-a")).toEqual(credentials);
      expect(await registry.credentialsOf("node-b")).toBeUndefined();
    });

    it("keeps a host whose credentials expired listed for days after, so status can report it", async () => {
      // Arrange
      const { clock, registry, store, site } = setup();
      const expiresAt = clock.now() + DAY_MS;

      // Act
      await provision(registry, "node-a", { expiresAt, kind: "certificate", issuedAt: clock.now() });

      // Assert: the entry outlives the credentials by days, not by the hour of slack every entry has.
      expect((await store.read({ site, identity: "node-a" }))?.expiresAt).toBeGreaterThanOrEqual(expiresAt + 7 * DAY_MS);
    });

    it("records renewal's failed tries on the host, for these credentials only, and drops them with new credentials", async () => {
      // Arrange
      const { clock, registry } = setup();
      const credentials: CredentialsExpiry = { expiresAt: clock.now() + DAY_MS, kind: "server_jwt", issuedAt: clock.now() };
      await provision(registry, "node-a", credentials);
      const mark = { attempts: 2, retryAt: clock.now() + 60_000, reason: "no reply to reprovision", at: clock.now() };

      // Act
      const marked = await registry.markRenewal({ identity: "node-a", credentials }, mark);
      const listed = await registry.expiries();
      clock.advance(2 * INTERVAL);
      const renewed: CredentialsExpiry = { expiresAt: clock.now() + 2 * DAY_MS, kind: "server_jwt", issuedAt: clock.now() };
      await provision(registry, "node-a", renewed);
      const stale = await registry.markRenewal({ identity: "node-a", credentials }, mark);

      // Assert
      expect(marked).toBe(true);
      expect(listed).toEqual([{ identity: "node-a", state: "provisioned", credentials, renewal: mark }]);
      expect(stale).toBe(false);
      expect(await registry.expiries()).toEqual([{ identity: "node-a", state: "provisioned", credentials: renewed }]);
    });

    it("clears a renewal mark when asked without one", async () => {
      // Arrange
      const { clock, registry } = setup();
      const credentials: CredentialsExpiry = { expiresAt: clock.now() + DAY_MS, kind: "certificate", issuedAt: clock.now() };
      await provision(registry, "node-a", credentials);
      await registry.markRenewal({ identity: "node-a", credentials }, { attempts: 1, retryAt: clock.now(), reason: "refused", at: clock.now() });

      // Act
      const cleared = await registry.markRenewal({ identity: "node-a", credentials });

      // Assert
      expect(cleared).toBe(true);
      expect(await registry.expiries()).toEqual([{ identity: "node-a", state: "provisioned", credentials }]);
    });
  });
}
