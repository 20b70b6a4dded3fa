/**
 * Every layer our encoder produces, validated against go-choria's protocol JSON Schemas (v1:
 * draft-04, v2: draft-07), plus the two DDLs against the DDL schema and the DDL facts the client
 * relies on. Where go-choria's code and schemas disagree the code wins (docs/protocol.md §13); those
 * exceptions are listed below, and the test fails if one stops being needed.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generateKeyPairSync, sign } from "node:crypto";
import Ajv from "ajv";
import AjvDraft04 from "ajv-draft-04";
import { describe, expect, it } from "vitest";
import { agentFilter } from "../../lib/choria/filter";
import { DISCOVERY_PING, encodeRequest, replySubject, type RequestSigner } from "../../lib/choria/protocol";
import { encodeReply } from "../support/choria-node/protocol";
import type { ProtocolVersion } from "../../lib/choria/envelope";
import { ksuid, uuidHex } from "../../lib/crypto/ids";

// The upstream Choria fixtures (shared/fixtures/choria, next to this repository).
const FIXTURES = join(__dirname, "..", "..", "..", "shared", "fixtures", "choria");
const fixtureText = (...path: string[]) => readFileSync(join(FIXTURES, ...path), "utf8");
const fixtureJson = <T = Record<string, unknown>>(...path: string[]) => JSON.parse(fixtureText(...path)) as T;

type Json = Record<string, unknown>;
type Layer = "transport" | "secure_request" | "request" | "secure_reply" | "reply";

/** Schema findings the code-over-schema rule makes us accept (docs/protocol.md §13). */
const CODE_OVER_SCHEMA: Array<{ version: ProtocolVersion; layer: Layer; instancePath: string; keyword: string; why: string }> = [
  {
    version: 2,
    layer: "reply",
    instancePath: "/protocol",
    keyword: "const",
    why: "the v2 reply schema's protocol const is io.choria.protocol.v2.request; go-choria's code writes and expects io.choria.protocol.v2.reply (the reply schema is only checked in strict mode)",
  },
];
// Not findings, because the schemas state them only in descriptions: v1 secure message fields are
// JSON strings (described as base64), v2 signature/hash are base64 (described as hex), and v2
// transports carry `trace` (described as `seen-by`; we send neither).

const validators = {
  1: new AjvDraft04({ allErrors: true, strict: false }),
  2: new Ajv({ allErrors: true, strict: false }),
} as const;

const compiled = new Map<string, ReturnType<Ajv["compile"]>>();

function validate(version: ProtocolVersion, layer: Layer, instance: unknown) {
  const key = `v${version}/${layer}`;
  let check = compiled.get(key);
  if (!check) {
    check = validators[version].compile(fixtureJson("schemas", "protocol", `v${version}`, `${layer}.json`));
    compiled.set(key, check);
  }
  check(instance);
  return (check.errors ?? []).map(({ instancePath, keyword }) => ({ instancePath, keyword }));
}

function expectedFindings(version: ProtocolVersion, layer: Layer) {
  return CODE_OVER_SCHEMA.filter((entry) => entry.version === version && entry.layer === layer).map(({ instancePath, keyword }) => ({ instancePath, keyword }));
}

const decoder = new TextDecoder();
const parse = (text: string) => JSON.parse(text) as Json;
const fromBase64 = (text: unknown) => Buffer.from(text as string, "base64").toString("utf8");

/** Peels our encoded message into its layers as parsed JSON. */
function layers(version: ProtocolVersion, bytes: Uint8Array, kind: "request" | "reply"): Record<Layer, Json | undefined> {
  const transport = parse(decoder.decode(bytes));
  const secure = parse(fromBase64(transport.data));
  const innerText = version === 1 ? (secure.message as string) : fromBase64(secure[kind]);
  return {
    transport,
    secure_request: kind === "request" ? secure : undefined,
    secure_reply: kind === "reply" ? secure : undefined,
    request: kind === "request" ? parse(innerText) : undefined,
    reply: kind === "reply" ? parse(innerText) : undefined,
  };
}

const { privateKey } = generateKeyPairSync("ed25519");
const signers: Record<ProtocolVersion, RequestSigner> = {
  1: { version: 1, kind: "insecure" },
  2: { version: 2, callerJwt: "a.b.c", sign: (bytes) => sign(null, bytes, privateKey) },
};

function ourRequest(version: ProtocolVersion, agent: string, payload: Uint8Array, filterAgent = agent) {
  const id = version === 1 ? uuidHex() : ksuid();
  return encodeRequest({
    id,
    senderId: "provisioner.example.net",
    callerId: "choria=provisioner.mcollective",
    collective: "provisioning",
    agent,
    ttl: 60,
    timeMs: Date.now(),
    filter: agentFilter(filterAgent),
    payload,
    replyTo: replySubject("provisioning", "choria=provisioner.mcollective", id),
    signer: signers[version],
  });
}

const rpcBody = new TextEncoder().encode(JSON.stringify({ agent: "choria_provision", action: "gencsr", data: { cn: "n1", token: "t" } }));
const replyBody = new TextEncoder().encode(JSON.stringify({ action: "gencsr", statuscode: 0, statusmsg: "OK", data: {} }));

describe.each([1, 2] as const)("protocol v%i schemas", (version) => {
  it.each([
    ["a direct RPC request", () => ourRequest(version, "choria_provision", rpcBody)],
    ["the discovery request", () => ourRequest(version, "discovery", DISCOVERY_PING, "choria_provision")],
  ])("accept every layer of %s", (_what, build) => {
    const parts = layers(version, build(), "request");

    for (const layer of ["transport", "secure_request", "request"] as const) {
      expect({ layer, findings: validate(version, layer, parts[layer]) }).toEqual({ layer, findings: expectedFindings(version, layer) });
    }
  });

  it.each([
    ["an RPC reply", replyBody],
    ["a discovery pong", new TextEncoder().encode("pong")],
  ])("accept every layer of %s, apart from the listed code-over-schema exceptions", (_what, payload) => {
    const bytes = encodeReply({ version, requestId: version === 1 ? uuidHex() : ksuid(), senderId: "n1.example.net", agent: "choria_provision", timeMs: Date.now(), payload });
    const parts = layers(version, bytes, "reply");

    for (const layer of ["transport", "secure_reply", "reply"] as const) {
      expect({ layer, findings: validate(version, layer, parts[layer]) }).toEqual({ layer, findings: expectedFindings(version, layer) });
    }
  });
});

describe("server-enforced rules our decoder mirrors are in the schemas", () => {
  it.each([
    [1, "request", "/envelope/requestid", (request: Json): void => {
      (request.envelope as Json).requestid = "short";
    }],
    [1, "request", "/envelope/ttl", (request: Json): void => {
      (request.envelope as Json).ttl = 29;
    }],
    [1, "request", "/envelope/filter", (request: Json): void => {
      delete ((request.envelope as Json).filter as Json).compound;
    }],
    [2, "secure_request", "/caller", (secure: Json): void => {
      secure.caller = "";
    }],
    [2, "request", "/ttl", (request: Json): void => {
      request.ttl = 0;
    }],
  ] as const)("v%i %s schema rejects the mutation at %s", (version, layer, path, mutate) => {
    const parts = layers(version, ourRequest(version, "rpcutil", rpcBody), "request");
    const target = parts[layer]!;

    mutate(target);

    expect(validate(version, layer, target).map((finding) => finding.instancePath)).toContain(path);
  });
});

describe("DDLs", () => {
  // The DDL schema declares draft-07 but names itself with draft-04's `id`, which Ajv refuses;
  // renaming the key to `$id` changes nothing that is validated.
  const { id: schemaId, ...ddlSchemaBody } = fixtureJson("schemas", "mcorpc", "ddl-v1-agent.json");
  const ddlSchema: Json = { $id: schemaId, ...ddlSchemaBody };
  const ajv = new Ajv({ allErrors: true, strict: false });
  const check = ajv.compile(ddlSchema);

  // Upstream's own DDL breaks upstream's schema: gencsr's X.509 subject inputs are upper case
  // (C, L, O, OU, ST) while input names must match ^[a-z0-9_]*$. go-choria never validates DDLs
  // against this schema at runtime, and the client sends these names as the DDL spells them.
  const KNOWN_DDL_FINDINGS: Record<string, string[]> = {
    choria_provision: ["gencsr:C", "gencsr:L", "gencsr:O", "gencsr:OU", "gencsr:ST"],
    rpcutil: [],
  };

  it.each(["choria_provision", "rpcutil"])("%s.ddl.json is valid against ddl-v1-agent.json apart from known upstream findings", (agent) => {
    const ddl = fixtureJson("ddl", `${agent}.ddl.json`);
    const actions = ddl.actions as Array<{ action: string }>;

    check(ddl);
    const findings = (check.errors ?? []).map((error) => {
      const index = /^\/actions\/(\d+)\/input$/.exec(error.instancePath)?.[1];
      const property = (error.params as { additionalProperty?: string }).additionalProperty;
      return index !== undefined && error.keyword === "additionalProperties" ? `${actions[Number(index)]?.action}:${property}` : `${error.instancePath} ${error.message}`;
    });

    expect(findings.sort()).toEqual(KNOWN_DDL_FINDINGS[agent]);
  });

  it("has the agent timeouts the RPC attempt budget is built on (choria_provision 20 s, rpcutil 2 s)", () => {
    const timeout = (agent: string) => (fixtureJson("ddl", `${agent}.ddl.json`).metadata as Json).timeout;

    expect(timeout("choria_provision")).toBe(20);
    expect(timeout("rpcutil")).toBe(2);
  });

  it("defaults inventory's upgradable output to false", () => {
    const actions = fixtureJson("ddl", "rpcutil.ddl.json").actions as Array<{ action: string; output: Record<string, Json> }>;
    const inventory = actions.find((action) => action.action === "inventory");

    expect(inventory?.output.upgradable).toMatchObject({ type: "boolean", default: false });
  });

  it("lists every choria_provision action the provisioner calls", () => {
    const actions = (fixtureJson("ddl", "choria_provision.ddl.json").actions as Array<{ action: string }>).map((entry) => entry.action);

    expect(actions).toEqual(expect.arrayContaining(["configure", "gen25519", "gencsr", "jwt", "release_update", "restart"]));
  });
});
