/**
 * The bootstrap expiry forecast end to end (docs/audit.md): simulated nodes present their
 * provisioning JWT, the engine records its issuer and expiry on the host's entry in DynamoDB Local
 * (an expired one from its refusal at step jwt), the next discovery gauges the hosts whose JWT expires
 * within 30 days and those whose JWT has expired, and the status function shows them per issuer.
 * Real NATS, DynamoDB Local and fauxqs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StatusFunctionReport } from "../../../lib/app/operator/functions";
import { DynamoDbAdmissionStore } from "../../../lib/dynamodb/admission-store";
import { EXTRA_METRIC } from "../../../lib/ports/metric-names";
import { startFleet, type Fleet } from "../../../dev/simulator";
import { makeHandler as discoverHandler } from "../../../handlers/discover";
import { makeHandler as provisionHandler } from "../../../handlers/provision";
import { makeHandler as statusHandler } from "../../../handlers/status";
import { lambdaContext, receive, sqsEvent, servicesForSuite, type LocalResources } from "../../support/aws";
import { startDeployment, TOKEN, type Deployment } from "../../support/handlers";

const SITE = "bootstrap";
const DAY_S = 24 * 3_600;
const ISSUER = "Choria Tokens Package";
const services = servicesForSuite();
let fleet: Fleet;
let deployment: Deployment;
let resources: LocalResources;
let expiresAtMs: number;

beforeAll(async () => {
  resources = await services.resources(`bootstrap-${Date.now()}`);
  const exp = Math.trunc(Date.now() / 1000) + 10 * DAY_S;
  expiresAtMs = exp * 1000;
  fleet = await startFleet({
    natsUrl: services.nats.url,
    identities: ["fresh.example.net", "stale.example.net"],
    token: TOKEN,
    restartDelayMs: 50,
    // The image's token expires in 10 days; stale.example.net presents one that expired an hour ago.
    jwtClaims: { iss: ISSUER, exp },
    faults: { "stale.example.net": { provisioningJwt: "expired" } },
  });
  deployment = await startDeployment({
    site: SITE,
    deploymentId: "leader",
    natsUrl: services.nats.url,
    resources,
    extraYaml: ["features: { jwt: true }", `jwt_verify_cert: "${fleet.signer.alg === "EdDSA" ? fleet.signer.publicKeyHex : ""}"`].join("\n"),
  });
});

afterAll(async () => {
  await deployment?.app.close();
  await fleet?.stop();
});

describe("the provisioning JWTs nodes present", () => {
  it("are recorded on their entries by issuer and expiry, gauged by the next discovery and shown by status", async () => {
    const getApp = async () => deployment.app;
    const discover = discoverHandler(getApp);
    const provision = provisionHandler(getApp);
    const store = new DynamoDbAdmissionStore({ client: services.dynamo, tableName: resources.tables.admission });

    const first = await discover({}, lambdaContext());
    const messages = await receive(services.sqsApi, resources.queues.hostWork);
    const response = await provision(sqsEvent(messages, resources.queues.hostWork), lambdaContext());
    const [fresh, stale] = await Promise.all([store.read({ site: SITE, identity: "fresh.example.net" }), store.read({ site: SITE, identity: "stale.example.net" })]);
    // The refused node is still in provisioning mode: this discovery admits it again, and gauges.
    const second = await discover({}, lambdaContext());
    const readmitted = await store.read({ site: SITE, identity: "stale.example.net" });
    const status = (await statusHandler(getApp)({}, lambdaContext())) as StatusFunctionReport;

    expect(first.admitted).toBe(2);
    expect(response.batchItemFailures).toEqual([]);
    // What landed in the table: the provisioned host with its token's issuer and expiry, the refused one with its expired token's.
    expect(fresh).toMatchObject({ state: "provisioned", provisioningJwtIssuer: ISSUER, provisioningJwtExpiresAt: expiresAtMs });
    expect(stale).toMatchObject({ state: "failed", failedStep: "jwt", provisioningJwtIssuer: ISSUER });
    expect(stale?.lastError).toContain("token is expired");
    expect(stale?.provisioningJwtExpiresAt).toBeLessThanOrEqual(Date.now());
    expect(second.admitted).toBe(1);
    expect(readmitted).toMatchObject({ state: "queued", provisioningJwtIssuer: ISSUER, provisioningJwtExpiresAt: stale?.provisioningJwtExpiresAt });
    expect(deployment.metrics.last(EXTRA_METRIC.provisioningJwtsExpiring)).toBe(1);
    expect(deployment.metrics.last(EXTRA_METRIC.provisioningJwtsExpired)).toBe(1);
    expect(status.registry.provisioningJwts).toEqual({
      windowMs: 30 * DAY_S * 1000,
      expiring: 1,
      expired: 1,
      issuers: [{ issuer: ISSUER, hosts: 2, expiring: 1, expired: 1, nextExpiresAt: expiresAtMs }],
    });
  });
});
