/**
 * A go-choria server's `server.conf` as the provisioning agent writes it and as the server reads it
 * back (config.NewConfig): `configure` writes one `key=value` line per setting, re-parses the file
 * and refuses it when it does not load; `restart` and the next start read the file, not the map the
 * provisioner sent. So a value holding a newline, an empty value or a key with `=` in it reaches
 * the node the way the file says, not the way the JSON said.
 */

import { ProvisionerError } from "../../lib/errors";

/** bufio.Scanner's default limit: a longer line stops the scan, and Go ignores the error. */
const MAX_LINE_BYTES = 64 * 1024 - 1;
/** go-choria config `parseConfigContents`: skip comments and blank lines, then `key = value`. */
const SKIP = /^#|^$/;
// Go's RE2 `.` is anything but a newline and `\s` is ASCII whitespace only.
const ITEM = /([^\n]+?)[\t\n\f\r ]*=[\t\n\f\r ]*([^\n]+)/;
const GO_TRUE = /^(1|yes|true|y|t)$/i;

/** The generated file would not load: `configure` aborts with this reason and keeps the old file. */
export class ServerConfigParseError extends ProvisionerError {}

/** Settings as go-choria reads a config file's text: later lines win, unmatched lines are ignored. */
export function parseServerConfig(text: string): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const raw of text.split("\n")) {
    if (Buffer.byteLength(raw) > MAX_LINE_BYTES) break;
    const line = raw.replace(/\r$/, "").trim();
    if (SKIP.test(line)) continue;
    const match = ITEM.exec(line);
    if (match?.[1] !== undefined && match[2] !== undefined) settings[match[1]] = match[2];
  }
  return settings;
}

/** go-choria confkey's bool reading: trimmed, case-insensitive 1/yes/true/y/t; anything else is false. */
export function goConfigBool(value: string): boolean {
  return GO_TRUE.test(value.trim());
}

/**
 * The checks config.NewConfig makes of a server config that can fail on a provisioned file
 * (`normalize`); the identity and collectives defaults cannot fail here.
 */
function assertLoads(settings: Record<string, string>): void {
  const anonymousClientTls = goConfigBool(settings["plugin.security.client_anon_tls"] ?? "");
  const remoteSigner =
    (settings["plugin.choria.security.request_signer.url"] ?? "") !== "" ||
    goConfigBool(settings["plugin.choria.security.request_signer.service"] ?? "");
  if (anonymousClientTls && !remoteSigner) {
    throw new ServerConfigParseError("anonymous TLS can only be enabled when a remote signer is configured");
  }
}

/** Writes `settings` as the provisioning agent does (header comment, `key=value` lines) and re-reads it. */
export function writeServerConfig(settings: Record<string, string>, header: string): { text: string; settings: Record<string, string> } {
  const text = [`# ${header}`, ...Object.entries(settings).map(([key, value]) => `${key}=${value}`), ""].join("\n");
  const parsed = parseServerConfig(text);
  assertLoads(parsed);
  return { text, settings: parsed };
}
