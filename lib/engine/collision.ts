/**
 * The engine's collision check (docs/audit.md): a node answers a request once, so a second answer
 * to one request, whose bytes differ from the first (the client hands on no byte-identical
 * network copy), is a second machine answering as the same identity, which discovery may not have
 * seen (a lifecycle admission, or v1 replies alike to the byte within one second). Two requests
 * are watched: `jwt` (with the jwt feature), whose answers are compared by the key exchange key
 * each server process makes for itself and the provisioning JWT, and `inventory`, which every
 * provisioning sends. The client keeps listening on their reply subjects while the sequence goes
 * on, so the host is not delayed; the check is read before the helper is asked for credentials and
 * again, listening stopped, before configure. A rebuilt node answers alone.
 */
import { fingerprint } from "../choria/envelope";
import type { ProvisioningClaims } from "../crypto/jwt-claims";
import type { SenderEvidence } from "../admission/quarantine";
import type { LaterReplies, RpcReply } from "../ports/rpc";
import { IdentityCollisionError } from "./errors";

/** Different answers kept as evidence; more are counted by the evidence's bound. */
const OTHERS_KEPT = 5;

interface JwtAnswer {
  ecdhPublic: string;
  jwt: string;
}

export class SecondAnswers {
  /** The `jwt` request's later answers. */
  readonly jwt: LaterReplies;
  /** The `inventory` request's later answers. */
  readonly inventory: LaterReplies;
  private first: JwtAnswer | undefined;
  private readonly others: JwtAnswer[] = [];
  private readonly otherInventories: string[] = [];
  private stopListening: () => void = () => undefined;

  constructor() {
    const until = new Promise<void>((resolve) => (this.stopListening = resolve));
    this.jwt = { onReply: (reply) => this.note(reply), until };
    this.inventory = { onReply: (_reply, print) => void (this.otherInventories.length < OTHERS_KEPT && this.otherInventories.push(print)), until };
  }

  /** The answer that decided the `jwt` request: what later answers are compared with. */
  decided(answer: JwtAnswer): void {
    this.first = answer;
  }

  stop(): void {
    this.stopListening();
  }

  /** Throws IdentityCollisionError when a second machine answered; `claims` are the deciding JWT's, verified. */
  assertAlone(identity: string, claims: ProvisioningClaims | null): void {
    const { first } = this;
    // Later answers may be noted before the deciding one is known: the client hands them on first.
    const others = this.others.filter((other) => !sameAnswer(first, other));
    if (first !== undefined && others.length > 0) {
      const senders = [{ ...senderOf(first), ...publicClaims(claims) }, ...others.map(senderOf)];
      throw new IdentityCollisionError(identity, { reason: `${senders.length} different answers to one jwt request: two machines answer as this identity`, senders });
    }
    if (this.otherInventories.length > 0) {
      const senders = [{ answer: "first", ...(first ? senderOf(first) : {}), ...publicClaims(claims) }, ...this.otherInventories.map((reply) => ({ answer: "later", reply }))];
      throw new IdentityCollisionError(identity, { reason: `${senders.length} different answers to one inventory request: two machines answer as this identity`, senders });
    }
  }

  private note(reply: RpcReply): void {
    const answer = { ecdhPublic: text(reply.data.ecdh_public), jwt: text(reply.data.jwt) };
    if (sameAnswer(this.first, answer) || this.others.some((other) => sameAnswer(other, answer)) || this.others.length >= OTHERS_KEPT) return;
    this.others.push(answer);
  }
}

function sameAnswer(one: JwtAnswer | undefined, other: JwtAnswer): boolean {
  return one?.ecdhPublic === other.ecdhPublic && one.jwt === other.jwt;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

/** A sender by fingerprints of its key exchange key and provisioning JWT: neither is secret, but the JWT carries the token, so only its digest. */
function senderOf(answer: JwtAnswer): SenderEvidence {
  return { ecdh: answer.ecdhPublic === "" ? "none" : fingerprint(answer.ecdhPublic), jwt: answer.jwt === "" ? "none" : fingerprint(answer.jwt) };
}

/** The verified JWT's public claims: who it names, who signed it, when it expires. */
function publicClaims(claims: ProvisioningClaims | null): SenderEvidence {
  if (!claims) return {};
  return { ...(claims.sub ? { subject: claims.sub } : {}), ...(claims.iss ? { issuer: claims.iss } : {}), ...(claims.exp ? { jwtExpiresAt: claims.exp } : {}) };
}
