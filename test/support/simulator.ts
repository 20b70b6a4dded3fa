import { generateKeyPairSync, sign } from "node:crypto";
import type { NatsConnection } from "nats";
import { BroadcastDiscoverer } from "../../lib/nats/discovery";
import type { ProtocolVersion } from "../../lib/choria/envelope";
import type { RequestSigner } from "../../lib/choria/protocol";
import { type ChoriaClientSettings, NatsChoriaRpc } from "../../lib/nats/rpc-client";

const callerKey = generateKeyPairSync("ed25519").privateKey;

/** The fleets' provisioning token (`cht`): a node whose JWT has none never enters provisioning mode. */
export const FLEET_TOKEN = "simulator-provisioning-token";

function clientSettings(version: ProtocolVersion, extra: Partial<ChoriaClientSettings> = {}): ChoriaClientSettings {
  const signer: RequestSigner =
    version === 1
      ? { version: 1, kind: "insecure" }
      : { version: 2, callerJwt: "caller.jwt.placeholder", sign: (bytes) => new Uint8Array(sign(null, bytes, callerKey)) };
  return {
    senderId: "provisioner.example.net",
    callerId: "choria=provisioner.mcollective",
    protocolVersion: version,
    signer,
    ...extra,
  };
}

export function rpcClient(nc: NatsConnection, version: ProtocolVersion, extra: Partial<ChoriaClientSettings> = {}): NatsChoriaRpc {
  return new NatsChoriaRpc(nc, clientSettings(version, extra));
}

export function discoverer(nc: NatsConnection, version: ProtocolVersion): BroadcastDiscoverer {
  return new BroadcastDiscoverer(nc, clientSettings(version));
}
