/** `reprovision` (operator): `{"identities": ["a.example.net", ...]}` -> admitted (source "operator") and queued, bypassing the once-per-interval rule. */
import * as z from "zod";
import { reprovision } from "../../app/operator";
import type { AppSettings } from "../settings";
import { InvalidInputError } from "../../errors";
import type { AppOverrides } from "../compose";
import { composeBrokerFunction, type BrokerFunctionParts } from "../compose-broker";
import { wrapHandler } from "../middleware";
import { lazyFunction } from "../runtime";
import type { ReprovisionResult } from "../../app/operator";

const reprovisionEvent = z.object({ identities: z.array(z.string()).min(1) });

/** What this function's handler calls: declared here, so the function depends on nothing that composes the others. */
export interface ReprovisionFunction {
  reprovision(identities: string[]): Promise<ReprovisionResult>;
  close(): Promise<void>;
}

export function reprovisionUseCase({ parts, admission }: BrokerFunctionParts): ReprovisionFunction["reprovision"] {
  // Reading the current term may win one, which leadership announces (hence the broker).
  return (identities) => reprovision({ currentTerm: () => parts.gate.currentTerm(), admission, logger: parts.logger }, identities);
}

export async function composeReprovision(settings: AppSettings, overrides: AppOverrides = {}): Promise<ReprovisionFunction> {
  const composed = await composeBrokerFunction(settings, "reprovision", overrides);
  return { reprovision: reprovisionUseCase(composed), close: composed.parts.close };
}

export function makeHandler(getFunction: () => Promise<ReprovisionFunction>) {
  return wrapHandler(getFunction, async (fn, event: unknown) => {
    const parsed = reprovisionEvent.safeParse(event);
    if (!parsed.success) throw new InvalidInputError('reprovision expects {"identities": ["<identity>", ...]} with at least one identity');
    return fn.reprovision(parsed.data.identities);
  });
}

export const handler = makeHandler(lazyFunction(composeReprovision));
