import { generateKeyPairSync, sign } from "node:crypto";
import { connect, type NatsConnection } from "nats";
import { decodeRequest, encodeReply, type IncomingRequest } from "../../support/choria-node/protocol";
import type { ProtocolVersion } from "../../../lib/choria/envelope";
import type { RequestSigner } from "../../../lib/choria/protocol";

const { privateKey } = generateKeyPairSync("ed25519");

/** v1: provisioning-mode nodes never verify, so the insecure fillers; v2: a real Ed25519 signature. */
function signerFor(version: ProtocolVersion): RequestSigner {
  return version === 1
    ? { version: 1, kind: "insecure" }
    : { version: 2, callerJwt: "header.claims.signature", sign: (bytes) => sign(null, bytes, privateKey) };
}

export const clientSettings = (version: ProtocolVersion) => ({
  senderId: "provisioner.test.local",
  callerId: "choria=provisioner.mcollective",
  protocolVersion: version,
  signer: signerFor(version),
});

export const encoder = new TextEncoder();

export function mcorpcReply(action: string, statuscode: number, statusmsg: string, data: unknown): Uint8Array {
  return encoder.encode(JSON.stringify({ action, statuscode, statusmsg, data }));
}

/** A well-formed reply from `sender` to `request`, with the given body. */
export function replyTo(request: IncomingRequest, sender: string, payload: Uint8Array): Uint8Array {
  return encodeReply({ version: request.version, requestId: request.id, senderId: sender, agent: request.agent, timeMs: Date.now(), payload });
}

/**
 * A raw responder on its own NATS connection: decodes each request on `subject` with the
 * server-side codec and publishes whatever `answer` returns to the request's reply subject.
 */
export async function respond(
  url: string,
  subject: string,
  answer: (request: IncomingRequest) => Uint8Array[],
): Promise<{ nc: NatsConnection; requests: IncomingRequest[] }> {
  const nc = await connect({ servers: url });
  const requests: IncomingRequest[] = [];
  nc.subscribe(subject, {
    callback: (_error, message) => {
      const request = decodeRequest(message.data);
      requests.push(request);
      for (const reply of answer(request)) nc.publish(request.replyTo, reply);
    },
  });
  await nc.flush();
  return { nc, requests };
}
