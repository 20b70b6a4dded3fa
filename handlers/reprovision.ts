/** Operator: `{"identities": ["a.example.net", ...]}` -> admitted (source "operator") and queued, bypassing the once-per-interval rule. */
import * as z from "zod";
import type { App } from "../lib/app";
import { wrapHandler } from "../lib/aws/middleware";
import { lazyApp } from "../lib/aws/runtime";
import { InvalidInputError } from "../lib/errors";

const reprovisionEvent = z.object({ identities: z.array(z.string()).min(1) });

export function makeHandler(getApp: () => Promise<App>) {
  return wrapHandler(getApp, async (app, event: unknown) => {
    const parsed = reprovisionEvent.safeParse(event);
    if (!parsed.success) throw new InvalidInputError('reprovision expects {"identities": ["<identity>", ...]} with at least one identity');
    return app.reprovision(parsed.data.identities);
  });
}

export const handler = makeHandler(lazyApp("reprovision"));
