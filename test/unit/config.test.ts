// Deployment config loading against real files in temp dirs: good configs resolve with defaults and
// come back frozen; each bad config fails with a ConfigError naming the file, the key path and the problem.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config/index.ts";

let dir: string;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "troupe-config-"));
  write("agent.ts", "export const graph = {};\nexport default graph;\n");
});

afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function write(rel: string, content: string): string {
  const file = path.join(dir, rel);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, content);
  return file;
}

function writeConfig(config: unknown, name = "service.json"): string {
  return write(name, typeof config === "string" ? config : JSON.stringify(config, null, 2));
}

/** Loads `file` expecting a ConfigError whose message contains every fragment. */
async function expectConfigError(file: string, env: NodeJS.ProcessEnv, ...fragments: string[]): Promise<ConfigError> {
  let caught: unknown;
  try {
    await loadConfig(file, { env });
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  const err = caught as ConfigError;
  for (const fragment of fragments) expect(err.message).toContain(fragment);
  return err;
}

describe("loadConfig: good configs", () => {
  it("resolves service.json graphs with and without an export, and applies every default", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts:graph", plain: "./agent.ts" } });
    const config = await loadConfig(file, { env: {} });

    expect(config.configPath).toBe(file);
    expect(config.configDir).toBe(dir);
    expect(config.graphs).toEqual([
      { graphId: "agent", filePath: path.join(dir, "agent.ts"), exportName: "graph", description: null },
      { graphId: "plain", filePath: path.join(dir, "agent.ts"), exportName: "default", description: null },
    ]);
    expect(config.env).toEqual({});
    expect(config.nodeVersion).toBe("20");
    expect(config.http.maxBodyBytes).toBe(10 * 1024 * 1024);
    expect(config.http.rateLimit).toBeNull(); // a standalone server limits no one unless asked
    expect(config.http.disableWebhooks).toBe(false);
    expect(config.http.app).toBeNull();
    expect(config.http.mountPrefix).toBe("");
    expect(config.http.cors).toEqual({
      allowOrigins: ["*"],
      allowMethods: ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"],
      allowHeaders: [],
      allowCredentials: false,
      allowOriginRegex: null,
      exposeHeaders: ["content-location", "x-pagination-total", "x-pagination-next", "x-request-id"],
      maxAgeSeconds: null,
    });
    expect(config.http.configurableHeaders.excludes).toEqual(["x-api-key", "x-tenant-id", "x-service-key"]);
    expect(config.auth).toEqual({ path: null, disableStudioAuth: false, allowStudioOnServe: false });
    expect(config.webhooks).toEqual({
      envPrefix: "LG_WEBHOOK_",
      headers: {},
      signingSecret: null,
      url: { allowedDomains: [], requireHttps: false, allowedPorts: null, disableLoopback: false, maxUrlLength: 2048, allowPrivateAddresses: null },
    });
    expect(config.store.index).toBeNull();
    expect(config.checkpointer.ttl).toEqual({ strategy: "delete", defaultTtlMinutes: null, sweepIntervalMinutes: 5, sweepLimit: 1000 });
    expect(config.warnings).toEqual([]);
  });

  it("returns a deeply frozen object", async () => {
    const config = await loadConfig(writeConfig({ graphs: { agent: "./agent.ts" } }), { env: {} });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.graphs[0])).toBe(true);
    expect(Object.isFrozen(config.http.cors.allowOrigins)).toBe(true);
    expect(() => {
      (config.http as { maxBodyBytes: number }).maxBodyBytes = 1;
    }).toThrow(TypeError);
    expect(() => (config.http.cors.allowOrigins as string[]).push("x")).toThrow(TypeError);
  });

  it("loads langgraph.json with {path, description} graphs in subfolders, app and auth modules, and explicit options", async () => {
    write("src/graphs/research.ts", "export const research = {};\n");
    write("src/app.ts", "export const app = {};\n");
    write("src/auth.ts", "export default {};\n");
    write("ui/chat.tsx", "export default {};\n");
    const file = writeConfig(
      {
        graphs: { research: { path: "./src/graphs/research.ts:research", description: "Finds things" } },
        node_version: "22",
        dependencies: ["."],
        http: {
          app: "./src/app.ts:app",
          disable_webhooks: true,
          disable_mcp: true,
          cors: { allow_origins: ["https://a.example"], expose_headers: ["X-Custom"], max_age: 600, allow_origin_regex: "^https://.*\\.example$" },
          configurable_headers: { includes: ["X-User-*"], excludes: ["x-secret"] },
          mount_prefix: "/api/",
          max_body_bytes: 1024,
          rate_limit: "eu",
        },
        auth: { path: "./src/auth.ts", disable_studio_auth: true },
        webhooks: { url: { allowed_domains: ["Hooks.Example.com", "*.example.org"], require_https: true, allowed_ports: [443, 8443], max_url_length: 500 } },
        store: { index: { dims: 3, embed: "openai:text-embedding-3-small" }, ttl: { default_ttl: 60, sweep_interval_minutes: 2 } },
        checkpointer: { ttl: { strategy: "keep_latest", default_ttl: 1440, sweep_limit: 10 } },
        ui: { chat: "./ui/chat.tsx" },
        ui_config: { shared: ["react"] },
      },
      "langgraph.json",
    );
    const config = await loadConfig(file, { env: {} });

    expect(config.graphs).toEqual([
      { graphId: "research", filePath: path.join(dir, "src/graphs/research.ts"), exportName: "research", description: "Finds things" },
    ]);
    expect(config.nodeVersion).toBe("22");
    expect(config.dependencies).toEqual(["."]);
    expect(config.http.app).toEqual({ filePath: path.join(dir, "src/app.ts"), exportName: "app" });
    expect(config.http.disableWebhooks).toBe(true);
    expect(config.http.disableMcp).toBe(true);
    expect(config.http.disableRuns).toBe(false);
    expect(config.http.cors.allowOrigins).toEqual(["https://a.example"]);
    expect(config.http.cors.exposeHeaders).toEqual(["x-custom", "content-location", "x-pagination-total", "x-pagination-next", "x-request-id"]);
    expect(config.http.cors.maxAgeSeconds).toBe(600);
    expect(config.http.cors.allowOriginRegex).toBe("^https://.*\\.example$");
    expect(config.http.configurableHeaders).toEqual({ includes: ["x-user-*"], excludes: ["x-secret"] });
    expect(config.http.mountPrefix).toBe("/api");
    expect(config.http.maxBodyBytes).toBe(1024);
    expect(config.http.rateLimit).toBe("eu");
    expect(config.auth).toEqual({
      path: { filePath: path.join(dir, "src/auth.ts"), exportName: "default" },
      disableStudioAuth: true,
      allowStudioOnServe: false,
    });
    expect(config.webhooks.url).toEqual({
      allowedDomains: ["hooks.example.com", "*.example.org"],
      requireHttps: true,
      allowedPorts: [443, 8443],
      disableLoopback: false,
      maxUrlLength: 500,
      allowPrivateAddresses: null,
    });
    expect(config.store.index).toEqual({ dims: 3, embed: { kind: "provider", provider: "openai", model: "text-embedding-3-small" }, fields: ["$"] });
    expect(config.store.ttl).toEqual({ refreshOnRead: true, defaultTtlMinutes: 60, sweepIntervalMinutes: 2 });
    expect(config.checkpointer.ttl).toEqual({ strategy: "keep_latest", defaultTtlMinutes: 1440, sweepIntervalMinutes: 5, sweepLimit: 10 });
    expect(config.ui).toEqual({ chat: path.join(dir, "ui/chat.tsx") });
    expect(config.uiConfig).toEqual({ shared: ["react"] });
  });

  it("merges an env object and resolves webhook header templates from process env overlaid with it", async () => {
    const file = writeConfig({
      graphs: { agent: "./agent.ts" },
      env: { LG_WEBHOOK_TOKEN: "from-config", OTHER: "1" },
      webhooks: {
        headers: {
          Authorization: "Bearer ${{ env.LG_WEBHOOK_TOKEN }}",
          "X-Pair": "${{env.LG_WEBHOOK_A}}:${{   env.LG_WEBHOOK_B   }}/end",
          "X-Static": "plain value",
        },
      },
    });
    const base = { LG_WEBHOOK_TOKEN: "from-process", LG_WEBHOOK_A: "alpha", LG_WEBHOOK_B: "beta" };
    const config = await loadConfig(file, { env: base });

    expect(config.env).toEqual({ LG_WEBHOOK_TOKEN: "from-config", OTHER: "1" });
    expect(config.webhooks.headers).toEqual({
      Authorization: "Bearer from-config",
      "X-Pair": "alpha:beta/end",
      "X-Static": "plain value",
    });
    expect(base.LG_WEBHOOK_TOKEN).toBe("from-process"); // the base env is not modified
  });

  it("reads env from a dotenv file (quotes, comments, export prefix, multi-line) and honours webhooks.env_prefix", async () => {
    write(
      "config/.env",
      [
        "# a comment",
        "",
        'export HOOK_SECRET="s3 cr\\"et"  # trailing comment',
        "PLAIN=some value # comment",
        "HASH=a#b",
        "SINGLE='literal ${x} \\n'",
        "EMPTY=",
        'MULTI="line1',
        'line2"',
      ].join("\n"),
    );
    const file = writeConfig({
      graphs: { agent: "./agent.ts" },
      env: "./config/.env",
      webhooks: { env_prefix: "HOOK_", headers: { "X-Secret": "${{ env.HOOK_SECRET }}" } },
    });
    const config = await loadConfig(file, { env: {} });

    expect(config.env).toEqual({
      HOOK_SECRET: 's3 cr"et',
      PLAIN: "some value",
      HASH: "a#b",
      SINGLE: "literal ${x} \\n",
      EMPTY: "",
      MULTI: "line1\nline2",
    });
    expect(config.webhooks.envPrefix).toBe("HOOK_");
    expect(config.webhooks.headers).toEqual({ "X-Secret": 's3 cr"et' });
  });

  it("resolves a relative config path against the working directory and graph paths against the config file", async () => {
    write("deploy/graphs/agent.ts", "export default {};\n");
    const file = write("deploy/service.json", JSON.stringify({ graphs: { agent: "./graphs/agent.ts" } }));
    const relative = path.relative(process.cwd(), file);
    const config = await loadConfig(relative, { env: {} });
    expect(config.configPath).toBe(file);
    expect(config.graphs[0].filePath).toBe(path.join(dir, "deploy/graphs/agent.ts"));
  });

  it("warns about unknown keys and stays silent about Docker-only keys", async () => {
    const file = writeConfig({
      graphs: { agent: "./agent.ts" },
      dockerfile_lines: ["RUN true"],
      api_version: "0.4",
      mystery: true,
      http: { logging_headers: { excludes: [] } },
    });
    const config = await loadConfig(file, { env: {} });
    expect(config.warnings).toHaveLength(2);
    expect(config.warnings).toContain(`${file}: mystery: unknown key, ignored`);
    expect(config.warnings).toContain(`${file}: http.logging_headers: unknown key, ignored`);
  });

  it("falls back to CORS_ALLOW_ORIGINS and MOUNT_PREFIX from the environment", async () => {
    const config = await loadConfig(writeConfig({ graphs: { agent: "./agent.ts" } }), {
      env: { CORS_ALLOW_ORIGINS: "https://a.test, https://b.test", MOUNT_PREFIX: "/p" },
    });
    expect(config.http.cors.allowOrigins).toEqual(["https://a.test", "https://b.test"]);
    expect(config.http.mountPrefix).toBe("/p");
  });
});

describe("loadConfig: bad configs", () => {
  it("missing graphs", async () => {
    const file = writeConfig({ env: {} });
    const err = await expectConfigError(file, {}, "service.json", "graphs: is required");
    expect(err.problems).toEqual([{ key: "graphs", message: "is required" }]);
  });

  it("graph file missing names the key and the resolved path", async () => {
    const file = writeConfig({ graphs: { agent: "./missing/agent.ts:graph" } }, "langgraph.json");
    await expectConfigError(file, {}, "langgraph.json", "graphs.agent:", "file not found", path.join(dir, "missing/agent.ts"));
  });

  it("graph in object form with a missing file names graphs.<id>.path", async () => {
    const file = writeConfig({ graphs: { agent: { path: "./nope.ts", description: "x" } } });
    await expectConfigError(file, {}, "service.json", "graphs.agent.path:", "file not found", path.join(dir, "nope.ts"));
  });

  it("bad import string (export not an identifier)", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts:" } });
    await expectConfigError(file, {}, "service.json", "graphs.agent:", 'must be "path:export"', '"./agent.ts:"');
  });

  it("bad type for http.disable_webhooks", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, http: { disable_webhooks: "yes" } });
    await expectConfigError(file, {}, "service.json", "http.disable_webhooks:", "must be a boolean", '"yes"');
  });

  it("template referencing a variable without the prefix", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, webhooks: { headers: { Authorization: "Bearer ${{ env.SECRET }}" } } });
    await expectConfigError(
      file,
      { SECRET: "x" },
      "service.json",
      "webhooks.headers.Authorization:",
      "SECRET",
      'does not start with the allowed prefix "LG_WEBHOOK_"',
    );
  });

  it("missing environment variable stops loading, naming header and variable", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, webhooks: { headers: { "X-Token": "t=${{ env.LG_WEBHOOK_TOKEN }}" } } });
    await expectConfigError(file, {}, "service.json", "webhooks.headers.X-Token:", "LG_WEBHOOK_TOKEN is not set");
  });

  it("webhooks.signing_secret: a Standard Webhooks secret, templates allowed", async () => {
    const secret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    const ok = writeConfig({ graphs: { agent: "./agent.ts" }, webhooks: { signing_secret: "${{ env.LG_WEBHOOK_SIGNING }}" } });
    expect((await loadConfig(ok, { env: { LG_WEBHOOK_SIGNING: secret } })).webhooks.signingSecret).toBe(secret);
    await expectConfigError(ok, {}, "webhooks.signing_secret:", "LG_WEBHOOK_SIGNING is not set");
    const bad = writeConfig({ graphs: { agent: "./agent.ts" }, webhooks: { signing_secret: "hunter2!" } });
    await expectConfigError(bad, {}, "service.json", "webhooks.signing_secret:", "whsec_");
    const short = writeConfig({ graphs: { agent: "./agent.ts" }, webhooks: { signing_secret: `whsec_${Buffer.alloc(4).toString("base64")}` } });
    await expectConfigError(short, {}, "webhooks.signing_secret:", "24 to 64 bytes");
  });

  it("malformed template", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, webhooks: { headers: { "X-Token": "${{ secrets.LG_WEBHOOK_X }}" } } });
    await expectConfigError(file, {}, "service.json", "webhooks.headers.X-Token:", "malformed template");
  });

  it("malformed JSON names the file, line and column", async () => {
    const file = writeConfig('{\n  "graphs": {\n    "agent": "./agent.ts",\n  }\n}\n');
    await expectConfigError(file, {}, "service.json", "invalid JSON at line 4, column 3");
  });

  it("truncated JSON points at the end of the file", async () => {
    const file = writeConfig('{\n  "graphs": {');
    await expectConfigError(file, {}, "service.json", "invalid JSON at line 2, column 14");
  });

  it("unknown dotenv file names the env key and the resolved path", async () => {
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, env: "./.env.production" });
    await expectConfigError(file, {}, "service.json", "env:", "dotenv file not found", path.join(dir, ".env.production"));
  });

  it("a dotenv syntax error names the env key and the line", async () => {
    write(".env", "GOOD=1\nthis is not an assignment\n");
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, env: ".env" });
    await expectConfigError(file, {}, "service.json", "env:", "line 2", "expected KEY=VALUE");
  });

  it("never quotes the contents of a file that is not a config or a dotenv file", async () => {
    const shadow = write("shadow", "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n");
    const err = await expectConfigError(shadow, {}, "invalid JSON");
    expect(err.message).not.toMatch(/root|\$6\$|hash/);
    const file = writeConfig({ graphs: { agent: "./agent.ts" }, env: "./shadow" });
    const envErr = await expectConfigError(file, {}, "line 1: expected KEY=VALUE");
    expect(envErr.message).not.toMatch(/root|\$6\$|hash/);
  });

  it("with a root, refuses a config or files it names outside it, without reading them", async () => {
    const inside = path.join(dir, "project");
    fs.mkdirSync(inside, { recursive: true });
    write("project/agent.ts", "export const graph = {};\n");
    write("outside.env", "TOKEN=elsewhere\n");
    const config = path.join(inside, "service.json");
    fs.writeFileSync(config, JSON.stringify({ graphs: { mine: "./agent.ts", theirs: "../agent.ts" }, env: "../outside.env" }));
    write("agent.ts", "export const graph = {};\n");
    const err = (await loadConfig(config, { root: inside }).catch((e: unknown) => e)) as ConfigError;
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toContain(`graphs.theirs: ${path.join(dir, "agent.ts")} is outside the project root ${inside}`);
    expect(err.message).toContain(`env: dotenv file ${path.join(dir, "outside.env")} is outside the project root`);
    expect(err.message).not.toContain("graphs.mine");
    await expect(loadConfig(writeConfig({ graphs: { agent: "./agent.ts" } }), { root: inside })).rejects.toThrow(/the config file is outside the project root/);
    // without a root the same files load
    fs.writeFileSync(config, JSON.stringify({ graphs: { mine: "./agent.ts", theirs: "../agent.ts" }, env: "../outside.env" }));
    expect((await loadConfig(config)).env).toEqual({ TOKEN: "elsewhere" });
  });

  it("missing config file", async () => {
    await expectConfigError(path.join(dir, "absent", "service.json"), {}, "service.json", "file not found");
  });

  it("lists every problem at once, with indexed key paths", async () => {
    const file = writeConfig({
      graphs: { agent: "./agent.ts" },
      http: { disable_webhooks: 1, cors: { allow_origins: "*" } },
      webhooks: { url: { allowed_ports: [443, "80", 70000] } },
      checkpointer: { ttl: { strategy: "sometimes" } },
    });
    const err = await expectConfigError(
      file,
      {},
      "http.disable_webhooks: must be a boolean — got 1",
      "http.cors.allow_origins: must be an array",
      'webhooks.url.allowed_ports[1]: must be an integer — got "80"',
      "webhooks.url.allowed_ports[2]: must be <= 65535",
      'checkpointer.ttl.strategy: must be one of "delete", "keep_latest" — got "sometimes"',
    );
    expect(err.problems).toHaveLength(5);
    for (const line of err.message.split("\n").slice(1)) expect(line).toContain(file);
  });

  it("lists every resolution problem at once (graph files, dotenv, templates)", async () => {
    const file = writeConfig({
      graphs: { a: "./a.ts", b: "./b.ts" },
      env: "./nope.env",
      webhooks: { headers: { "X-A": "${{ env.LG_WEBHOOK_A }}" }, url: { allowed_domains: ["https://x.com/"] } },
    });
    const err = await expectConfigError(file, {}, "graphs.a:", "graphs.b:", "env:", "webhooks.headers.X-A:", "webhooks.url.allowed_domains[0]:");
    expect(err.problems).toHaveLength(5);
  });
});
