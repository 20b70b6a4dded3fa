/**
 * `reprovision` (operator): `{"identities": ["a.example.net", ...], "force": false}` -> admitted
 * (source "operator") and queued under the current term, bypassing the once-per-interval rule. The
 * same use case and refusals as `choria-provisioner reprovision`: a host the registry does not know
 * or has just provisioned is refused unless `"force": true`, since admitting it only works on a node
 * that is in provisioning mode now.
 */
import * as z from "zod";
import { reprovision } from "../../app/operator/functions";
import { InvalidInputError } from "../../errors";
import type { BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import type { ReadmitResult } from "../../app/operator/report";

const reprovisionEvent = z.object({ identities: z.array(z.string()).min(1), force: z.boolean().optional() });

/** What the function is asked: the hosts, and whether to admit unknown or provisioned ones anyway. */
interface ReprovisionRequest {
  identities: string[];
  force?: boolean;
}

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
interface ReprovisionFunction {
  reprovision(request: ReprovisionRequest): Promise<ReadmitResult>;
  close(): Promise<void>;
}

/** The function on its composed parts: its handler's (handlers/reprovision.ts) and the whole local stack's. */
export function reprovisionFunction({ parts, admission }: BrokerFunctionParts): ReprovisionFunction {
  const { config } = parts;
  const deps = {
    // Reading the current term may win one, which leadership announces (hence the broker).
    currentTerm: () => parts.gate.currentTerm(),
    notLeading: `deployment ${config.deploymentId} does not lead site "${config.site}" (a standby, paused, or the lease store unreachable): invoke reprovision on the leader's stack`,
    admission,
    registry: parts.registry,
    forceHint: '"force": true',
    logger: parts.logger,
  };
  return { reprovision: ({ identities, force }) => reprovision(deps, identities, { force: force === true }), close: parts.close };
}

export function makeHandler(getFunction: () => Promise<ReprovisionFunction>) {
  return wrapHandler(getFunction, async (fn, event: unknown) => {
    const parsed = reprovisionEvent.safeParse(event);
    if (!parsed.success) {
      throw new InvalidInputError('reprovision expects {"identities": ["<identity>", ...], "force": true|false} with at least one identity', { cause: parsed.error });
    }
    return fn.reprovision(parsed.data);
  });
}
