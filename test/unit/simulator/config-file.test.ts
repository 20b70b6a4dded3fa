import { describe, expect, it } from "vitest";
import { goConfigBool, parseServerConfig, writeServerConfig } from "../../../dev/simulator/config-file";

// go-choria config parseConfigContents and confkey strToBool.
describe("server.conf as go-choria reads it", () => {
  it("takes `key = value` lines, skips comments, blanks and lines without a value; later lines win", () => {
    const text = "# header\n\n loglevel = debug \nidentity=a.example.net\r\nempty=\nno equals sign\nidentity = b.example.net\nk=v=w";

    expect(parseServerConfig(text)).toEqual({ loglevel: "debug", identity: "b.example.net", k: "v=w" });
  });

  it("stops at a line longer than bufio.Scanner's 64 KiB limit", () => {
    const text = ["a=1", `b=${"x".repeat(64 * 1024)}`, "c=3"].join("\n");

    expect(parseServerConfig(text)).toEqual({ a: "1" });
  });

  it("reads booleans as strToBool does", () => {
    expect(["1", "yes", "YES", "true", "y", "T", " true "].map(goConfigBool)).toEqual(Array(7).fill(true));
    expect(["0", "no", "false", "on", "off", "enabled", ""].map(goConfigBool)).toEqual(Array(7).fill(false));
  });

  it("writes key=value lines under the header and returns the settings the file reads back", () => {
    const written = writeServerConfig({ a: "1", b: "two\nc=3" }, "written in request r1");

    expect(written.text).toBe("# written in request r1\na=1\nb=two\nc=3\n");
    expect(written.settings).toEqual({ a: "1", b: "two", c: "3" });
  });

  it("refuses anonymous client TLS without a remote signer, as config.normalize does", () => {
    expect(() => writeServerConfig({ "plugin.security.client_anon_tls": "1" }, "h")).toThrow(/anonymous TLS can only be enabled when a remote signer is configured/);
    expect(writeServerConfig({ "plugin.security.client_anon_tls": "1", "plugin.choria.security.request_signer.service": "y" }, "h").settings).toHaveProperty(
      "plugin.security.client_anon_tls",
    );
  });
});
