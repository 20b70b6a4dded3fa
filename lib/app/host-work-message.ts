/**
 * The host-work message on the SQS queue: `{"v":1,"identity","term","admittedAt","source"}`. It is
 * validated on receipt because anything may land on a queue; a message that fails is poison and
 * goes to the dead-letter queue with its reason instead of being retried.
 */
import * as z from "zod";
import { identityProblem } from "../choria/identity";
import { InvalidInputError } from "../errors";
import type { HostWork } from "../ports/host-work";

const hostWorkSchema = z.strictObject({
  v: z.literal(1),
  identity: z.string().superRefine((identity, context) => {
    const problem = identityProblem(identity);
    if (problem) context.addIssue({ code: "custom", message: `identity ${problem}` });
  }),
  term: z.number().int().nonnegative(),
  admittedAt: z.number().int().positive(),
  source: z.enum(["discovery", "event", "operator"]),
});

export function encodeHostWork(work: HostWork): string {
  return JSON.stringify({ v: 1, identity: work.identity, term: work.term, admittedAt: work.admittedAt, source: work.source });
}

/** Throws InvalidInputError naming the first offending field; values are never echoed. */
export function decodeHostWork(body: string): HostWork {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    throw new InvalidInputError("invalid host-work message: not JSON", { cause: error });
  }
  const result = hostWorkSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue && issue.path.length > 0 ? issue.path.map(String).join(".") : "(message)";
    throw new InvalidInputError(`invalid host-work message: "${field}" ${issue?.message ?? "is invalid"}`, { cause: result.error });
  }
  const { identity, term, admittedAt, source } = result.data;
  return { identity, term, admittedAt, source };
}
