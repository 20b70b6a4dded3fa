/**
 * Every ERROR record carries its cause chain (issue 32, point 6): for each named error class of
 * lib/, a record logged with it says the whole chain under it, names and messages, in its
 * structured `error` field and in the message text an operator reads, through both loggers (the
 * console logger of the local run, the Powertools logger of CloudWatch), with secrets masked in
 * every link.
 */
import { join } from "node:path";
import type { Context } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { wrapHandler } from "../../../lib/aws/middleware";
import { createLogger } from "../../../lib/aws/powertools-logger";
import { AdmissionStoreError } from "../../../lib/ports/admission-store";
import { ConfigError, ProvisionerError, RpcError, RpcTransportError } from "../../../lib/errors";
import { createConsoleLogger } from "../../../dev/local/console-logger";
import type { Logger } from "../../../lib/ports/logger";
import { captureOutput, captureOutputOf } from "../../support/capture";
import { declaredClasses, extendsClass, ROOT, sources, type DeclaredClass } from "../errors/declared-classes";

const SECRET = "s3cret-provisioning-token-value";
const IDENTITY = "node775.local.example.net";

type ErrorClass = new (...args: never[]) => Error;

/** What the AWS SDK throws: the exception is the error's name. */
function awsError(name: string, message: string, cause?: unknown): Error {
  return Object.assign(new Error(message, { cause }), { name });
}

/** The chain a store failure brings: a denied role over a request that timed out, a secret in one link's text. */
function storeFailure(): Error {
  return awsError(
    "AccessDeniedException",
    `User: arn:aws:sts::123456789012:assumed-role/provisioner is not authorized to perform: dynamodb:UpdateItem (token ${SECRET})`,
    awsError("TimeoutError", "The operation was aborted due to timeout"),
  );
}

/**
 * How to make an error whose constructor is not ProvisionerError's (message, { cause }), by the
 * class that declares that constructor: its subclasses take the same arguments.
 */
const FACTORIES: Record<string, (errorClass: ErrorClass, cause: Error) => Error> = {
  ConfigError: (errorClass, cause) => Reflect.construct(errorClass, ["token", "could not resolve secretsmanager:prod/token", { cause }]),
  ConfigProblemsError: (errorClass, cause) => Reflect.construct(errorClass, [[new ConfigError("token", "could not resolve secretsmanager:prod/token", { cause })]]),
  RpcError: (errorClass, cause) => Reflect.construct(errorClass, [IDENTITY, "choria_provision#jwt", "the broker closed the connection", { cause }]),
  RpcStatusError: (errorClass) => Reflect.construct(errorClass, [IDENTITY, "choria_provision#configure", IDENTITY, 1, "Incorrect provision token supplied"]),
  RpcRetriesExhaustedError: (errorClass, cause) =>
    Reflect.construct(errorClass, [IDENTITY, "choria_provision#jwt", 5, new RpcTransportError(IDENTITY, "choria_provision#jwt", "not sent", { cause })]),
  OutOfTimeError: (errorClass) => Reflect.construct(errorClass, ["choria_provision#configure try 2", 20_000, 1_500]),
  AppSettingsError: (errorClass) => Reflect.construct(errorClass, [[{ variable: "ADMISSION_TABLE", message: "is required" }]]),
  HelperStartError: (errorClass) => Reflect.construct(errorClass, ["ENOENT", "cannot start /opt/provision-helper: no such file"]),
  AdmissionOutcomeUnknownError: (errorClass, cause) =>
    Reflect.construct(errorClass, [IDENTITY, new AdmissionStoreError(`the admission of ${IDENTITY} stayed unknown`, { cause }), async () => undefined]),
  IdentityCollisionError: (errorClass, cause) => Reflect.construct(errorClass, [IDENTITY, { reason: "2 different answers to one jwt request", senders: [] }, { cause }]),
  EnvelopeError: (errorClass, cause) => Reflect.construct(errorClass, ["secure request", "the signature does not verify", { cause }]),
  ProvisioningJwtExpiredError: (errorClass, cause) =>
    Reflect.construct(errorClass, ["could not parse provisioner token: token has invalid claims: token is expired", { issuer: "Choria Tokens Package", expiresAt: 1_700_000_000_000 }, { cause }]),
};

const declared = declaredClasses(sources("lib"));
const errorClasses = [...declared.values()].filter(({ name }) => extendsClass(name, "ProvisionerError", declared) === true);

/**
 * The class itself, from the module that exports it. A class its module keeps private is made
 * afresh over its (exported) base under its own name: the test below holds such a class to an empty
 * body, so it behaves exactly as that.
 */
async function classOf(entry: DeclaredClass): Promise<ErrorClass> {
  if (entry.exported) return ((await import(join(ROOT, entry.file))) as Record<string, ErrorClass>)[entry.name] as ErrorClass;
  const base = declared.get(entry.base);
  const Base = base ? await classOf(base) : ProvisionerError;
  return { [entry.name]: class extends Base {} }[entry.name] as ErrorClass;
}

/** An instance of `entry`'s class with the store failure under it, where its constructor takes a cause. */
async function instanceOf(entry: DeclaredClass): Promise<Error> {
  const errorClass = await classOf(entry);
  let maker: DeclaredClass | undefined = entry;
  while (maker && !maker.declaresConstructor && maker.name !== "ProvisionerError") maker = declared.get(maker.base);
  const factory = maker && maker.name !== "ProvisionerError" ? FACTORIES[maker.name] : undefined;
  if (maker && maker.name !== "ProvisionerError" && !factory) throw new TypeError(`no factory for the constructor of ${maker.name}: add one to FACTORIES`);
  return factory ? factory(errorClass, storeFailure()) : Reflect.construct(errorClass, [`a failure of kind ${entry.name}`, { cause: storeFailure() }]);
}

/** Each link of the chain under and including `error`, as the test reads it by hand. */
function linksOf(error: Error): Error[] {
  const links: Error[] = [];
  for (let link: unknown = error; link instanceof Error; link = link.cause) links.push(link);
  return links;
}

const masked = (text: string) => text.split(SECRET).join("[redacted]");

interface ErrorField {
  name: string;
  message: string;
  causes?: Array<{ name?: string; message: string }>;
}

interface LoggedRecord {
  level: string;
  message: string;
  error?: ErrorField;
}

const LOGGERS: Array<[string, (log: (logger: Logger) => void) => string[]]> = [
  [
    "the console logger (local run)",
    (log) => {
      const lines: string[] = [];
      log(createConsoleLogger({ write: (line) => lines.push(line), secretValues: [SECRET] }));
      return lines;
    },
  ],
  ["the Powertools logger (CloudWatch)", (log) => captureOutput(() => log(createLogger({ secretValues: [SECRET] })))],
];

describe.each(LOGGERS)("an ERROR record from %s", (_logger, logWith) => {
  it("covers every named error class of lib/, private ones by an empty body", () => {
    expect(errorClasses.length).toBeGreaterThan(40);
    expect(errorClasses.filter((entry) => !entry.exported && !entry.emptyBody).map(({ name, file }) => `${name} (${file})`)).toEqual([]);
  });

  it.each(errorClasses.map((entry) => [entry.name, entry] as const))("carries the whole cause chain of a %s, names and messages", async (_name, entry) => {
    // Arrange
    const error = await instanceOf(entry);
    const wrapped = new ProvisionerError("handling the host work failed", { cause: error });

    // Act
    const lines = logWith((logger) => {
      logger.error("the call failed", { error });
      logger.error("the call failed", { error: wrapped });
    });

    // Assert: the error as the record's own, and as a cause under another.
    expect(lines).toHaveLength(2);
    for (const [line, logged] of [
      [lines[0], error],
      [lines[1], wrapped],
    ] as const) {
      const record = JSON.parse(line ?? "{}") as LoggedRecord;
      const [top, ...causes] = linksOf(logged);
      expect(record.level).toBe("ERROR");
      expect(record.error?.name).toBe(top?.name);
      expect(record.error?.causes ?? []).toEqual(causes.map((cause) => ({ name: cause.name, message: masked(cause.message) })));
      for (const link of linksOf(logged)) {
        // An RPC failure under the call that gave up on it is carried by its reason, which that call quotes.
        const said = masked(link instanceof RpcError && link !== top ? link.reason : link.message);
        expect(record.message).toContain(said);
        expect(record.error?.message).toContain(said);
        if (!(link instanceof ProvisionerError)) expect(record.message).toContain(`${link.name}: `);
      }
      expect(record.message.startsWith("the call failed: ")).toBe(true);
      expect(line).not.toContain(SECRET);
    }
  });
});

describe("an invocation whose function cannot be composed", () => {
  it("is an ERROR record with the cause chain when the function cannot be composed, not only Lambda's Invoke Error line with the top message", async () => {
    // Arrange: the composition could not resolve a secret: the reference names one that is not there.
    const notFound = awsError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
    const error = new ConfigError("token", "could not resolve secretsmanager:prod/tokn", { cause: notFound });
    const handler = wrapHandler<{ close(): Promise<void> }, unknown, unknown>(
      () => Promise.reject(error),
      async () => undefined,
    );
    const context = { awsRequestId: "req-1", functionName: "discover", getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

    // Act
    let thrown: unknown;
    const lines = await captureOutputOf(async () => {
      thrown = await handler({}, context).catch((failure: unknown) => failure);
    });

    // Assert
    expect(thrown).toBe(error);
    // Powertools metrics also say, in plain text, that there were none to publish.
    const records = lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as LoggedRecord);
    const record = records.find((logged) => logged.level === "ERROR");
    expect(record?.message).toBe(
      'the function could not be composed: invalid configuration key "token": could not resolve secretsmanager:prod/tokn: ResourceNotFoundException: Secrets Manager can\'t find the specified secret.',
    );
    expect(record?.error?.causes).toEqual([{ name: "ResourceNotFoundException", message: "Secrets Manager can't find the specified secret." }]);
  });
});
