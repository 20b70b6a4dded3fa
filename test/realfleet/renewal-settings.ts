/**
 * What the real-fleet renewal suites (renewal, renewal-failover, renewal-offline) give the stack and
 * the nodes alike: the client certificate and caller id renewal connects with on a v1 network, the
 * node-side action policy that lets it call reprovision (docs/renewal.md, "What the nodes need"),
 * and the `renew` section with each suite's own timing.
 */
import { join } from "node:path";
import { issueCertificate } from "../../dev/local/real-fleet";
import type { RealFleet } from "../../dev/local/real-fleet";
import type { ProvisionedFleetOptions } from "../../dev/local/real-fleet-stack";

/** A name go-choria's default certname whitelist accepts (it ends `.mcollective`). */
const RENEWAL_CERTNAME = "provisioner.mcollective";
const RENEWAL_CALLER = `choria=${RENEWAL_CERTNAME}`;
/** The v1 action policy that lets the provisioner's client call `choria_provision#reprovision`. */
const REPROVISION_POLICY = { choria_provision: `policy default deny\nallow\t${RENEWAL_CALLER}\treprovision\t*\t*\n` };

export interface RenewTiming {
  beforeS: number;
  rate: number;
  maxInFlight: number;
  timeoutS: number;
}

/** The `renew` section: on, with the suite's timing, on the fleet's target (main) broker. */
export function renewSection(timing: RenewTiming, targetBrokerUrl: string) {
  return { enabled: true, before: `${timing.beforeS}s`, rate: timing.rate, max_in_flight: timing.maxInFlight, timeout: `${timing.timeoutS}s`, broker_urls: [targetBrokerUrl] };
}

/** A v1 fleet's provisioner configuration for renewal: the client certificate the nodes accept, its caller id, and `renew`. */
export async function v1RenewalConfig(fleet: Pick<RealFleet, "ca" | "dir" | "targetBroker">, timing: RenewTiming) {
  const certificate = await issueCertificate(fleet.ca, join(fleet.dir, "renewal-client-tls"), RENEWAL_CERTNAME, { rsa: true });
  return {
    callerid: RENEWAL_CALLER,
    tls: { ca: fleet.ca.certFile, cert: certificate.certFile, key: certificate.keyFile },
    renew: renewSection(timing, fleet.targetBroker.url),
  };
}

/** A v1 (jwt + pki) fleet set up for renewal: certificates valid `validityS`, the policy and configuration above. */
export function v1RenewalFleet(timing: RenewTiming, validityS: number, dynamoDbEndpoint: string) {
  return {
    protocolV2: false,
    features: ["jwt", "pki"],
    dynamoDbEndpoint,
    certificateValiditySeconds: validityS,
    policies: REPROVISION_POLICY,
    config: (fleet: Parameters<typeof v1RenewalConfig>[0]) => v1RenewalConfig(fleet, timing),
  } satisfies Partial<ProvisionedFleetOptions>;
}
