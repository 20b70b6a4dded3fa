/**
 * An executable helper shipped as a Lambda layer (docs/deploy.md, "Executable helpers"): the layer is
 * built from examples/helper-layer/, Lambda mounts it at /opt and puts /opt/bin on PATH. Here the
 * directory is copied into a layer-shaped tree (<tmp>/opt) and run by the provisioner's own runner
 * with Lambda's PATH, as the provision function runs `helper: /opt/bin/provision-helper`.
 * scripts/emulator/deploy.sh also runs it from the layer zip `sls deploy` uploaded.
 */
import { cp, mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecHelperRunner } from "../../../lib/helper/exec-runner";
import type { HelperRequest } from "../../../lib/ports/helper";

const LAYER_SOURCE = resolve(import.meta.dirname, "../../../examples/helper-layer");

const request = (identity: string): HelperRequest => ({ identity, csr: null, ed25519_pubkey: null, inventory: "{}", jwt: null });

let root: string;
let opt: string;
/** Lambda's PATH for nodejs22.x with the layer's bin/ (the runtime's own directories first). */
let lambdaPath: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "helper-layer-"));
  opt = join(root, "opt");
  await cp(LAYER_SOURCE, opt, { recursive: true });
  lambdaPath = ["/usr/local/bin", "/usr/bin", "/bin", join(opt, "bin")].join(":");
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("helper shipped as a layer", () => {
  it("keeps the helper executable in the layer directory", async () => {
    const mode = (await stat(join(LAYER_SOURCE, "bin/provision-helper"))).mode;

    expect(mode & 0o111).not.toBe(0);
  });

  it("configures a node when run from the mounted layer path", async () => {
    // Arrange
    const runner = new ExecHelperRunner({ command: `${join(opt, "bin/provision-helper")}`, env: { PATH: lambdaPath } });

    // Act
    const response = await runner.run(request("node1.example.net"));

    // Assert
    expect(response.defer).toBe(false);
    expect(response.configuration).toMatchObject({ identity: "node1.example.net", "plugin.choria.server.provision": "false" });
  });

  it("is found by name on Lambda's PATH, and takes its settings from the function's environment", async () => {
    // Arrange
    const runner = new ExecHelperRunner({
      command: "provision-helper",
      env: { PATH: lambdaPath, PROVISION_HELPER_BROKERS: "tls://broker.lon.example.net:4222" },
    });

    // Act
    const response = await runner.run(request("node2.example.net"));

    // Assert
    expect(response.configuration?.["plugin.choria.middleware_hosts"]).toBe("tls://broker.lon.example.net:4222");
  });

  it("defers a node as its rules say", async () => {
    const runner = new ExecHelperRunner({ command: join(opt, "bin/provision-helper"), env: { PATH: lambdaPath } });

    expect((await runner.run(request("defer-node3.example.net"))).defer).toBe(true);
  });
});
