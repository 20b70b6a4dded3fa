#!/usr/bin/env node
// Example provisioning helper for the process runner (`helper: node examples/helpers/provision-helper.mjs`).
// Reads the host JSON on stdin and writes the response JSON on stdout; the rules, including the
// defer-/shutdown- identity conventions and PROVISION_HELPER_* variables, are in decide.mjs.
import { Buffer } from "node:buffer";
import process from "node:process";
import { decide } from "./decide.mjs";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);

let request;
try {
  request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
} catch {
  process.stderr.write("provision-helper: stdin is not valid JSON\n");
  process.exit(1);
}

process.stdout.write(JSON.stringify(decide(request, process.env)));
