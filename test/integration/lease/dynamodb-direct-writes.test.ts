/**
 * The admission table's direct writes on the wire: what a loopback server in DynamoDB's place
 * receives (the JSON request, signed by SigV4 as AWS verifies it, recomputed here from the AWS
 * specification rather than by the SDK's signer) and what the writes make of its answers (the
 * SDK client's retry strategy, the SDK's error classes). What DynamoDB itself does with the writes
 * is tested against DynamoDB Local in test/integration/admission.
 */
import { createHash, createHmac } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { ConditionalCheckFailedException, DynamoDBClient, DynamoDBServiceException } from "@aws-sdk/client-dynamodb";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DynamoDbDirectWrites } from "../../../lib/dynamodb/direct-writes";

const CREDENTIALS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" } as const;
const REGION = "eu-west-1";

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

type Answer = { status: number; body: string; date?: string };

let server: Server;
let endpoint: string;
let received: Received[] = [];
let answers: Answer[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks).toString("utf8") });
      const answer = answers.shift() ?? { status: 200, body: "{}" };
      response.writeHead(answer.status, { "content-type": "application/x-amz-json-1.0", "x-amzn-requestid": `req-${received.length}`, ...(answer.date ? { date: answer.date } : {}) });
      response.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  received = [];
  answers = [];
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function writes(maxAttempts = 3): DynamoDbDirectWrites {
  return new DynamoDbDirectWrites(new DynamoDBClient({ region: REGION, endpoint, credentials: CREDENTIALS, maxAttempts }));
}

const UPDATE = {
  TableName: "admissions",
  Key: { site: { S: "lab" }, identity: { S: "n1.example.net" } },
  UpdateExpression: "SET #state = :state",
  ConditionExpression: "#term = :term",
  ExpressionAttributeNames: { "#state": "state", "#term": "term" },
  ExpressionAttributeValues: { ":state": { S: "provisioning" }, ":term": { N: "7" } },
  ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
};

/** SigV4 as AWS documents it (canonical request, string to sign, derived key), independent of the SDK. */
function expectedSignature(request: Received): { signature: string; signedHeaders: string; scope: string } {
  const authorization = String(request.headers.authorization);
  const signedHeaders = /SignedHeaders=([^,]+)/.exec(authorization)?.[1] ?? "";
  const scope = /Credential=[^/]+\/([^,]+)/.exec(authorization)?.[1] ?? "";
  const amzDate = String(request.headers["x-amz-date"]);
  const canonicalHeaders = signedHeaders
    .split(";")
    .map((name) => `${name}:${String(request.headers[name]).trim().replace(/\s+/g, " ")}\n`)
    .join("");
  const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
  const canonicalRequest = [request.method, request.url, "", canonicalHeaders, signedHeaders, sha256(request.body)].join("\n");
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonicalRequest)].join("\n");
  const [date = "", region = "", service = ""] = scope.split("/");
  const hmac = (key: string | Buffer, text: string) => createHmac("sha256", key).update(text).digest();
  const key = hmac(hmac(hmac(hmac(`AWS4${CREDENTIALS.secretAccessKey}`, date), region), service), "aws4_request");
  return { signature: createHmac("sha256", key).update(stringToSign).digest("hex"), signedHeaders, scope };
}

describe("DynamoDbDirectWrites on the wire", () => {
  it("sends the write as DynamoDB's JSON request, signed as AWS verifies it", async () => {
    // Arrange
    const direct = writes();

    // Act
    const output = await direct.updateItem(UPDATE);

    // Assert
    expect(output).toEqual({});
    expect(received).toHaveLength(1);
    const [request] = received as [Received];
    expect(request.method).toBe("POST");
    expect(request.url).toBe("/");
    expect(request.headers["x-amz-target"]).toBe("DynamoDB_20120810.UpdateItem");
    expect(request.headers["content-type"]).toBe("application/x-amz-json-1.0");
    expect(JSON.parse(request.body)).toEqual(UPDATE);
    const { signature, signedHeaders, scope } = expectedSignature(request);
    expect(scope).toMatch(new RegExp(`^\\d{8}/${REGION}/dynamodb/aws4_request$`));
    expect(signedHeaders.split(";")).toEqual(expect.arrayContaining(["host", "x-amz-date", "x-amz-target", "content-type"]));
    expect(String(request.headers.authorization)).toBe(`AWS4-HMAC-SHA256 Credential=${CREDENTIALS.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`);
  });

  it("goes where the SDK sends DynamoDB requests for the region when no endpoint is configured", async () => {
    // Arrange: the client's HTTP handler is the one the writes use; this one records instead of sending.
    const sent: { protocol: string; hostname: string; port?: number; headers: Record<string, string> }[] = [];
    const handler = {
      handle: async (request: { protocol: string; hostname: string; port?: number; headers: Record<string, string> }) => {
        sent.push(request);
        return { response: { statusCode: 200, headers: {}, body: Readable.from([Buffer.from("{}")]) } };
      },
    };
    const client = new DynamoDBClient({ region: REGION, credentials: CREDENTIALS, requestHandler: handler as never });

    // Act
    await new DynamoDbDirectWrites(client).updateItem(UPDATE);

    // Assert
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ protocol: "https:", hostname: `dynamodb.${REGION}.amazonaws.com`, port: undefined });
    expect(sent[0]?.headers.host).toBe(`dynamodb.${REGION}.amazonaws.com`);
  });

  it("names DeleteItem as its target", async () => {
    // Arrange
    const direct = writes();

    // Act
    await direct.deleteItem({ TableName: "admissions", Key: UPDATE.Key });

    // Assert
    expect(received.map((request) => request.headers["x-amz-target"])).toEqual(["DynamoDB_20120810.DeleteItem"]);
  });

  it("names PutItem as its target and sends the item as given", async () => {
    // Arrange
    const direct = writes();
    const item = { site: { S: "ledger#s#node-1" }, identity: { S: "credential-1" }, issuedAt: { N: "1" } };

    // Act
    await direct.putItem({ TableName: "admissions", Item: item });

    // Assert
    expect(received.map((request) => request.headers["x-amz-target"])).toEqual(["DynamoDB_20120810.PutItem"]);
    expect(JSON.parse(received[0]!.body)).toEqual({ TableName: "admissions", Item: item });
  });

  it("returns the attributes DynamoDB answers with", async () => {
    // Arrange
    answers = [{ status: 200, body: JSON.stringify({ Attributes: { state: { S: "provisioning" }, term: { N: "7" } } }) }];

    // Act
    const output = await writes().updateItem(UPDATE);

    // Assert
    expect(output).toEqual({ Attributes: { state: { S: "provisioning" }, term: { N: "7" } } });
  });

  it("throws the SDK's ConditionalCheckFailedException with the stored item, without retrying", async () => {
    // Arrange
    const item = { site: { S: "lab" }, identity: { S: "n1.example.net" }, term: { N: "8" } };
    answers = [{ status: 400, body: JSON.stringify({ __type: "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException", message: "The conditional request failed", Item: item }) }];

    // Act
    const failure = await writes().updateItem(UPDATE).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(ConditionalCheckFailedException);
    expect((failure as ConditionalCheckFailedException).Item).toEqual(item);
    expect((failure as ConditionalCheckFailedException).$metadata.httpStatusCode).toBe(400);
    expect(received).toHaveLength(1);
  });

  it("retries a throttled write and a server error with the client's retry strategy, then succeeds", async () => {
    // Arrange
    answers = [
      { status: 400, body: JSON.stringify({ __type: "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", message: "slow down" }) },
      { status: 500, body: JSON.stringify({ __type: "com.amazon.coral.service#InternalFailure" }) },
      { status: 200, body: JSON.stringify({ Attributes: { term: { N: "7" } } }) },
    ];

    // Act
    const output = await writes(3).updateItem(UPDATE);

    // Assert
    expect(output).toEqual({ Attributes: { term: { N: "7" } } });
    expect(received).toHaveLength(3);
    expect(new Set(received.map((request) => request.body)).size).toBe(1);
  });

  it("gives up after the client's maxAttempts with the last answer as a named DynamoDBServiceException", async () => {
    // Arrange
    answers = [
      { status: 503, body: "<html>unavailable</html>" },
      { status: 500, body: JSON.stringify({ __type: "com.amazon.coral.service#InternalFailure", message: "try later" }) },
    ];

    // Act
    const failure = await writes(2).updateItem(UPDATE).catch((error: unknown) => error);

    // Assert
    expect(failure).toBeInstanceOf(DynamoDBServiceException);
    expect(failure).toMatchObject({ name: "InternalFailure", message: "try later", $fault: "server", $metadata: { httpStatusCode: 500, requestId: "req-2" } });
    expect(received).toHaveLength(2);
  });

  it("takes DynamoDB's clock from its answer when a request is refused as skewed, and signs the retry at that time", async () => {
    // Arrange: DynamoDB's clock is an hour ahead of this one.
    const serverNow = new Date(Date.now() + 3_600_000);
    answers = [
      { status: 400, body: JSON.stringify({ __type: "com.amazon.coral.service#InvalidSignatureException", message: "Signature expired" }), date: serverNow.toUTCString() },
      { status: 200, body: "{}" },
    ];

    // Act
    await writes(3).updateItem(UPDATE);

    // Assert
    expect(received).toHaveLength(2);
    const signedAt = received.map((request) => Date.parse(String(request.headers["x-amz-date"]).replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, "$1-$2-$3T$4:$5:$6Z")));
    expect(Math.abs((signedAt[0] ?? 0) - Date.now())).toBeLessThan(60_000);
    expect(Math.abs((signedAt[1] ?? 0) - serverNow.getTime())).toBeLessThan(60_000);
  });

  it("does not retry a request DynamoDB refuses as invalid, and names why", async () => {
    // Arrange
    answers = [{ status: 400, body: JSON.stringify({ __type: "com.amazon.coral.validate#ValidationException", message: "ExpressionAttributeValues contains invalid key" }) }];

    // Act
    const failure = await writes(3).updateItem(UPDATE).catch((error: unknown) => error);

    // Assert
    expect(failure).toMatchObject({ name: "ValidationException", message: "ExpressionAttributeValues contains invalid key", $fault: "client" });
    expect(received).toHaveLength(1);
  });
});
