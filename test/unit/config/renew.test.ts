import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../lib/config/config";
import { checkDeploymentConfig } from "../../../lib/config/deploy-check";
import { configErrorOf } from "../../support/config-errors";

const MINIMAL = { helper: "/usr/local/bin/helper", broker_urls: ["nats://broker.example.net:4222"] };
const MAIN = ["tls://main.example.net:4222"];

describe("the renew section", () => {
  it("is off by default, with its documented limits", () => {
    // Act
    const { renew } = parseConfig(MINIMAL);

    // Assert
    expect(renew).toEqual({
      enabled: false,
      before: { fraction: 0.2 },
      ratePerMinute: 10,
      maxInFlight: 50,
      failureThreshold: 5,
      failureWindow: 20,
      timeoutMs: 15 * 60_000,
      brokerUrls: [],
      collective: "mcollective",
      windows: [],
      freezes: [],
      shortestLifetimeMs: undefined,
      slowStart: undefined,
      abort: undefined,
    });
  });

  it("takes `before` as a duration or a percentage of the lifetime", () => {
    expect(parseConfig({ ...MINIMAL, renew: { before: "7d" } }).renew.before).toEqual({ ms: 7 * 24 * 3_600_000 });
    expect(parseConfig({ ...MINIMAL, renew: { before: "33.5%" } }).renew.before).toEqual({ fraction: 0.335 });
  });

  it("refuses a percentage outside (0, 100) and a duration that is not positive, naming the key", () => {
    expect(configErrorOf(() => parseConfig({ ...MINIMAL, renew: { before: "100%" } }))).toMatchObject({ key: "renew.before" });
    expect(configErrorOf(() => parseConfig({ ...MINIMAL, renew: { before: "0s" } }))).toMatchObject({ key: "renew.before" });
    expect(configErrorOf(() => parseConfig({ ...MINIMAL, renew: { rate: 0 } }))).toMatchObject({ key: "renew.rate" });
  });

  it("needs the main broker when enabled, and checks its URLs", () => {
    expect(configErrorOf(() => parseConfig({ ...MINIMAL, renew: { enabled: true } }))).toMatchObject({ key: "renew.broker_urls" });
    expect(configErrorOf(() => parseConfig({ ...MINIMAL, renew: { enabled: true, broker_urls: ["main:4222"] } }))).toMatchObject({ key: "renew.broker_urls.0" });
    expect(parseConfig({ ...MINIMAL, renew: { enabled: true, broker_urls: MAIN } }).renew).toMatchObject({ enabled: true, brokerUrls: MAIN });
  });

  it("defaults the collective to choria for protocol v2", () => {
    const config = parseConfig({ ...MINIMAL, protocol_version: 2, client_jwt: "x.y.z", client_seed: "ab".repeat(32) });
    expect(config.renew.collective).toBe("choria");
  });
});

describe("the renew section at package time", () => {
  it("is refused by check-config when enabled without the main broker, and renew's role may read the token's reference", () => {
    // Arrange
    const yaml = (renew: string) =>
      ["helper: /opt/bin/helper", "broker_urls: [tls://broker.example.net:4222]", "token: ssm:/choria/token", `renew: ${renew}`].join("\n");

    // Act
    const refused = checkDeploymentConfig(yaml("{ enabled: true }"), { helperLayer: true });
    const accepted = checkDeploymentConfig(yaml("{ enabled: true, broker_urls: [tls://main.example.net:4222] }"), { helperLayer: true });

    // Assert
    expect(refused.errors.map((error) => error.key)).toEqual(["renew.broker_urls"]);
    expect(accepted.errors).toEqual([]);
    expect(accepted.references.renew).toEqual([{ store: "ssm", name: "/choria/token" }]);
    expect(accepted.references.status).toEqual([]);
  });
});
