// The documented control-plane flow end to end over HTTP, with real deployment servers as child
// processes: create → poll the revision until DEPLOYED (only once /ok answers) → drive the
// deployment with the SDK → PATCH rolls over with no lost run; build/deploy failures, SKIPPED,
// redeploy, paging, crash restart, control-plane restart, delete.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startControlPlane, type ControlPlaneOptions, type RunningControlPlane } from "../src/control-plane/server.ts";
import { buildRevision } from "../src/control-plane/deployments/build.ts";

const REPO = fileURLToPath(new URL("..", import.meta.url));
/** the tenant of requests without auth guards or X-Tenant-Id (routes.ts) */
const TENANT = "00000000-0000-0000-0000-000000000000";
/** examples/ copied into the tenant's projects directory (deployment sources must be there) */
let EXAMPLES_CONFIG: string;
let tenantDir: string;
const HAPPY = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"];
const TERMINAL = new Set(["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"]);
/** per-test limit of the steps that start servers (2 shared cores: a start can take 10 s under load) */
const SLOW_MS = 120_000;
const human = (content: string) => ({ messages: [{ role: "human", content }] });

interface Deployment {
  id: string;
  name: string;
  url: string;
  status: string;
  latest_revision_id: string;
  active_revision_id: string | null;
  secrets: { name: string; value: string }[];
  source_revision_config: { langgraph_config_path: string };
  display_name: string | null;
}
interface Revision {
  id: string;
  status: string;
  status_message: string | null;
  restart_count: number;
}

let dir: string;
let projectDir: string;
let gatedDir: string;
let cp: RunningControlPlane;
const logs: string[] = [];
const pidsSeen = new Set<number>();
const opts = (): ControlPlaneOptions => ({
  host: "127.0.0.1",
  port: 0,
  dataDir: dir,
  rateLimit: null,
  deployments: { workers: 1, rateLimit: "off", restartBackoffMs: 200, readyTimeoutMs: 45_000 },
  log: (m) => logs.push(m),
});

async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(cp.url + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function okStatus(url: string): Promise<number> {
  try {
    const res = await fetch(`${url}/ok`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${logs.slice(-10).join("\n")}`);
    await sleep(100);
  }
}

/**
 * Polls a revision until it is terminal; returns it with the distinct statuses seen in order, and
 * the answer of the deployment's /ok fetched right after DEPLOYED was first seen.
 */
async function pollRevision(
  d: { id: string; url: string },
  revisionId: string,
  timeoutMs = 60_000,
): Promise<{ rev: Revision; seen: string[]; okAtDeployed: number | null }> {
  const seen: string[] = [];
  let okAtDeployed: number | null = null;
  const rev = await waitFor(
    `revision ${revisionId} to end`,
    async () => {
      const r = await api<Revision>("GET", `/v2/deployments/${d.id}/revisions/${revisionId}`);
      expect(r.status).toBe(200);
      if (seen.at(-1) !== r.body.status) seen.push(r.body.status);
      if (r.body.status === "DEPLOYED" && okAtDeployed === null) okAtDeployed = await okStatus(d.url);
      return TERMINAL.has(r.body.status) ? r.body : undefined;
    },
    timeoutMs,
  );
  return { rev, seen, okAtDeployed };
}

const serverPid = (id: string) => cp.deployments.deployer.supervisor.pid(id);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "troupe-cp-"));
  // The default projects directory of the default tenant: <data dir>/projects/<tenant id>. Packages
  // resolve through a node_modules link there (a link is fine: only the project's own files must be inside).
  tenantDir = join(dir, "projects", TENANT);
  mkdirSync(tenantDir, { recursive: true });
  cpSync(join(REPO, "examples"), join(tenantDir, "examples"), { recursive: true });
  symlinkSync(join(REPO, "node_modules"), join(tenantDir, "node_modules"));
  EXAMPLES_CONFIG = join(tenantDir, "examples/service.json");
  // Projects that fail to build: a graph module throwing at import, and one not exporting a graph.
  projectDir = join(tenantDir, "boom");
  mkdirSync(projectDir);
  // slow to fail (1 s), so a rollout of it keeps the deployment's lane busy for a while
  writeFileSync(join(projectDir, "boom.mjs"), 'await new Promise((r) => setTimeout(r, 1000));\nthrow new Error("boom at import");\n');
  writeFileSync(join(projectDir, "service.json"), JSON.stringify({ graphs: { boom: "./boom.mjs:graph" } }));
  // The same graphs as examples/, plus a module whose import waits for a file: the test decides
  // when the BUILDING step of a revision using this config may end.
  gatedDir = join(tenantDir, "gated");
  mkdirSync(gatedDir);
  writeFileSync(
    join(gatedDir, "gate.mjs"),
    [
      'import { existsSync } from "node:fs";',
      'while (!existsSync(new URL("./release", import.meta.url))) await new Promise((r) => setTimeout(r, 25));',
      'export const graph = () => { throw new Error("the gate graph is not runnable"); };',
    ].join("\n"),
  );
  writeFileSync(
    join(gatedDir, "service.json"),
    JSON.stringify({
      graphs: { echo: "../examples/echo.ts:graph", slow: "../examples/slow.ts:graph", gate: "./gate.mjs:graph" },
    }),
  );
  cp = await startControlPlane(opts());
});

afterAll(async () => {
  await cp?.close();
  for (const pid of pidsSeen) if (alive(pid)) process.kill(pid, "SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

describe("control plane: deployments", () => {
  let main: Deployment;
  let firstRevision: string;
  let badPath: Deployment;
  let badImport: Deployment;
  let threadId: string;

  it("rejects invalid requests with 422 and unknown ids with the platform's 404", async () => {
    const missing = await api<{ detail: { loc: string[] }[] }>("POST", "/v2/deployments", { name: "x", source: "internal_source" });
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0].loc).toEqual(["body", "source_revision_config"]);

    const bad = await api<{ detail: { loc: (string | number)[]; msg: string }[] }>("POST", "/v2/deployments", {
      name: "My Agent",
      source: "github",
      source_config: {},
      source_revision_config: { langgraph_config_path: EXAMPLES_CONFIG },
      secrets: [
        { name: "OK_NAME", value: "1" },
        { name: "bad-name", value: "2" },
      ],
    });
    expect(bad.status).toBe(422);
    const locs = bad.body.detail.map((i) => i.loc.join("."));
    expect(locs).toEqual(expect.arrayContaining(["body.name", "body.source", "body.secrets.1.name"]));
    expect(bad.body.detail.find((i) => i.loc[1] === "name")!.msg).toContain('"my-agent"');

    const unknown = "01a20000-0000-7000-8000-000000000000";
    expect(await api("GET", `/v2/deployments/${unknown}`)).toEqual({ status: 404, body: { detail: `Deployment ID ${unknown} not found.` } });
    expect((await api("GET", `/v2/deployments/${unknown}/revisions`)).status).toBe(404);
    expect((await api("PATCH", `/v2/deployments/${unknown}`, { display_name: "x" })).status).toBe(404);
    expect((await api("GET", "/v2/deployments/not-a-uuid")).status).toBe(422);
    expect((await api("GET", "/v2/deployments?limit=101")).status).toBe(422);
    expect((await api("GET", "/v2/deployments?status=NOPE")).status).toBe(422);
    expect((await api("GET", "/v2/deployments?deployment_ids=abc")).status).toBe(422);
    expect((await api("GET", `/v2/deployments?deployment_ids=${unknown}`)).status).toBe(200);
    // a NUL byte cannot go into an environment variable or a path: refused now, not at build time
    const nul = await api<{ detail: { loc: (string | number)[] }[] }>("POST", "/v2/deployments", {
      name: "nul-agent",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: `${EXAMPLES_CONFIG}\u0000x` },
      secrets: [{ name: "A", value: "a\u0000b" }],
    });
    expect(nul.status).toBe(422);
    expect(nul.body.detail.map((i) => i.loc.join("."))).toEqual(
      expect.arrayContaining(["body.secrets.0.value", "body.source_revision_config.langgraph_config_path"]),
    );

    const doc = await api<{ openapi: string; info: { title: string; version: string }; paths: Record<string, unknown> }>("GET", "/openapi.json");
    expect(doc.body.openapi).toBe("3.1.0");
    expect(doc.body.info).toMatchObject({ title: "Troupe Control Plane API", version: "0.1.0" });
    expect(Object.keys(doc.body.paths)).toEqual(
      expect.arrayContaining(["/v2/deployments", "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy"]),
    );
  });

  it("confines sources to the organization's projects directory, and never echoes a file's contents", async () => {
    type Detail = { detail: { loc: (string | number)[]; msg: string }[] };
    // another organization's project, with the .env it deploys with
    const otherTenant = "01a20000-0000-7000-8000-00000000beef";
    const otherDir = join(dir, "projects", otherTenant, "agent");
    mkdirSync(otherDir, { recursive: true });
    writeFileSync(join(otherDir, ".env"), "OPENAI_API_KEY=other-tenant-secret\n");
    writeFileSync(join(otherDir, "service.json"), JSON.stringify({ graphs: { echo: "./echo.ts:graph" }, env: ".env" }));
    symlinkSync("/etc", join(tenantDir, "etc-link"));
    const create = (name: string, path: string, headers: Record<string, string> = {}) =>
      fetch(`${cp.url}/v2/deployments`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ name, source: "internal_source", source_revision_config: { langgraph_config_path: path }, secrets: [] }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as Detail & Deployment }));
    for (const path of [
      "/etc/shadow",
      "/etc/passwd",
      otherDir,
      join(otherDir, "service.json"),
      `../${otherTenant}/agent`,
      "etc-link/passwd",
      join(REPO, "examples/service.json"),
    ]) {
      const r = await create("outside", path);
      expect(r.status, path).toBe(422);
      expect(r.body.detail).toEqual([
        {
          loc: ["body", "source_revision_config", "langgraph_config_path"],
          msg: expect.stringContaining("inside this organization's projects directory"),
          type: "value_error",
        },
      ]);
    }
    // relative paths resolve against the organization's own directory
    const relative = await create("relative-path", "examples");
    expect(relative.status).toBe(201);
    expect(relative.body.source_revision_config.langgraph_config_path).toBe(EXAMPLES_CONFIG);
    expect((await api("DELETE", `/v2/deployments/${relative.body.id}`)).status).toBe(204);

    // A config inside may not name files outside (graphs, dotenv); a file that is not a config is
    // reported without its contents.
    const sneaky = join(tenantDir, "sneaky");
    mkdirSync(sneaky);
    writeFileSync(
      join(sneaky, "service.json"),
      JSON.stringify({
        graphs: { theirs: join(otherDir, "../../", TENANT, "examples/echo.ts:graph"), host: "/etc/passwd:graph" },
        env: join(otherDir, ".env"),
      }),
    );
    writeFileSync(join(sneaky, "shadow-like.json"), "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n");
    const named = await create("names-outside", sneaky);
    const notJson = await create("not-json", join(sneaky, "shadow-like.json"));
    expect([named.status, notJson.status]).toEqual([201, 201]);
    const built = await pollRevision(named.body, named.body.latest_revision_id);
    expect(built.rev.status).toBe("BUILD_FAILED");
    expect(built.rev.status_message).toContain("/etc/passwd is outside the project root");
    expect(built.rev.status_message).toContain(`dotenv file ${join(otherDir, ".env")} is outside the project root`);
    expect(built.rev.status_message).not.toContain("other-tenant-secret");
    const broken = await pollRevision(notJson.body, notJson.body.latest_revision_id);
    expect(broken.rev.status).toBe("BUILD_FAILED");
    expect(broken.rev.status_message).toContain("invalid JSON");
    expect(broken.rev.status_message).not.toMatch(/root|\$6\$|hash/);
    // PATCH to a path outside is refused like a create
    const outside = await api<Detail>("PATCH", `/v2/deployments/${named.body.id}`, { source_revision_config: { langgraph_config_path: "/etc/passwd" } });
    expect(outside.status).toBe(422);
    // secrets cannot set the platform's own variables (rate limits, trusted proxies, keys)
    const reserved = await api<Detail>("PATCH", `/v2/deployments/${named.body.id}`, { secrets: [{ name: "TROUPE_RATE_LIMIT_SCALE", value: "100000" }] });
    expect(reserved.status).toBe(422);
    expect(reserved.body.detail[0].loc).toEqual(["body", "secrets", 0, "name"]);
    for (const d of [named.body, notJson.body]) expect((await api("DELETE", `/v2/deployments/${d.id}`)).status).toBe(204);
    // the other organization deploys its own project by a path relative to its directory
    const theirs = await create("their-agent", "agent", { "x-tenant-id": otherTenant });
    expect(theirs.status).toBe(201);
    expect(theirs.body.source_revision_config.langgraph_config_path).toBe(join(otherDir, "service.json"));
    const res = await fetch(`${cp.url}/v2/deployments/${theirs.body.id}`, { method: "DELETE", headers: { "x-tenant-id": otherTenant } });
    expect(res.status).toBe(204);
  });

  it(
    "creates a deployment; its revision walks the statuses and is DEPLOYED only once /ok answers",
    async () => {
      const created = await api<Deployment>("POST", "/v2/deployments", {
        name: "agent-one",
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: EXAMPLES_CONFIG },
        secrets: [{ name: "GREETING", value: "hello" }],
      });
      expect(created.status).toBe(201);
      main = created.body;
      expect(main).toMatchObject({
        name: "agent-one",
        status: "AWAITING_DATABASE",
        active_revision_id: null,
        secrets: [{ name: "GREETING", value: "********" }],
      });
      expect(main.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      firstRevision = main.latest_revision_id;

      // The failing projects build meanwhile (their own lanes).
      badPath = (
        await api<Deployment>("POST", "/v2/deployments", {
          name: "bad-path",
          source: "internal_source",
          source_config: null,
          source_revision_config: { langgraph_config_path: join(tenantDir, "nowhere/service.json") },
          secrets: [],
        })
      ).body;
      badImport = (
        await api<Deployment>("POST", "/v2/deployments", {
          name: "bad-import",
          source: "internal_source",
          source_config: null,
          source_revision_config: { langgraph_config_path: projectDir },
          secrets: [],
        })
      ).body;
      expect(badImport.source_revision_config.langgraph_config_path).toBe(join(projectDir, "service.json"));
      expect(
        (
          await api("POST", "/v2/deployments", {
            name: "agent-one",
            source: "internal_source",
            source_revision_config: { langgraph_config_path: EXAMPLES_CONFIG },
          })
        ).status,
      ).toBe(409);

      const got = await api<Deployment>("GET", `/v2/deployments/${main.id}`);
      expect(got.body).toMatchObject({ id: main.id, url: main.url, latest_revision_id: firstRevision });

      const { rev, seen, okAtDeployed } = await pollRevision(main, firstRevision);
      expect(rev.status, `statuses seen: ${seen.join(" → ")}; ${rev.status_message}`).toBe("DEPLOYED");
      // in order, a subsequence of the happy path, and the slow steps were observed
      const idx = seen.map((s) => HAPPY.indexOf(s));
      expect(idx.every((i, k) => i >= 0 && (k === 0 || i > idx[k - 1]))).toBe(true);
      expect(seen).toEqual(expect.arrayContaining(["BUILDING", "DEPLOYING", "DEPLOYED"]));
      expect(okAtDeployed).toBe(200);

      const after = (await api<Deployment>("GET", `/v2/deployments/${main.id}`)).body;
      expect(after).toMatchObject({ status: "READY", active_revision_id: firstRevision, image_version: "0.1.0" });
      pidsSeen.add(serverPid(main.id)!);
    },
    SLOW_MS,
  );

  it("serves the deployment to the SDK", async () => {
    const client = new Client({ apiUrl: main.url, apiKey: null });
    const thread = await client.threads.create();
    threadId = thread.thread_id;
    const out = (await client.runs.wait(threadId, "echo", { input: human("hi there") })) as { messages: { content: string }[] };
    expect(out.messages.at(-1)!.content).toBe("hi there");
  });

  it(
    "PATCH with new secrets and config makes a revision and rolls over with no lost run",
    async () => {
      const client = new Client({ apiUrl: main.url, apiKey: null });
      const t = await client.threads.create({ metadata: { purpose: "rollover" } });
      const oldPid = serverPid(main.id)!;
      let oldExitedAt = 0;
      const watch = (async () => {
        while (alive(oldPid)) await sleep(25);
        oldExitedAt = Date.now();
      })();

      const patched = await api<Deployment>("PATCH", `/v2/deployments/${main.id}`, {
        secrets: [{ name: "GREETING", value: "bonjour" }],
        source_revision_config: { langgraph_config_path: gatedDir },
        display_name: "Agent One",
      });
      expect(patched.status).toBe(200);
      expect(patched.body.latest_revision_id).not.toBe(firstRevision);
      expect(patched.body).toMatchObject({ display_name: "Agent One", active_revision_id: firstRevision, url: main.url });
      expect(patched.body.source_revision_config.langgraph_config_path).toBe(join(gatedDir, "service.json"));
      // While the new revision builds the old server still serves: queue runs on it, then let the
      // build end. The old server drains (the running run finishes, the queued ones stay) and the new
      // one, on the same data dir, executes the rest.
      await waitFor("the new revision to build", async () =>
        (await api<Revision>("GET", `/v2/deployments/${main.id}/revisions/${patched.body.latest_revision_id}`)).body.status === "BUILDING" ? true : undefined,
      );
      const runs = [];
      for (let i = 0; i < 4; i++) {
        runs.push(
          await client.runs.create(t.thread_id, "slow", { input: human(`m${i}`), config: { configurable: { sleep_ms: 2_000 } }, multitaskStrategy: "enqueue" }),
        );
      }
      writeFileSync(join(gatedDir, "release"), "");
      const { rev, seen, okAtDeployed } = await pollRevision(main, patched.body.latest_revision_id);
      expect(rev.status, `${seen.join(" → ")}: ${rev.status_message}`).toBe("DEPLOYED");
      expect(okAtDeployed).toBe(200);
      await watch;
      const newPid = serverPid(main.id)!;
      pidsSeen.add(newPid);
      expect(newPid).not.toBe(oldPid);

      // every run accepted by the old server ends successfully; some ran on the new one
      for (const r of runs) await client.runs.join(t.thread_id, r.run_id);
      const finals = await Promise.all(runs.map((r) => client.runs.get(t.thread_id, r.run_id)));
      expect(finals.map((r) => r.status)).toEqual(["success", "success", "success", "success"]);
      expect(finals.some((r) => Date.parse(r.updated_at) > oldExitedAt)).toBe(true);
      const state = (await client.threads.getState(t.thread_id)).values as { messages: { content: string }[] };
      expect(state.messages.map((m) => m.content)).toEqual(["m0", "m0", "m1", "m1", "m2", "m2", "m3", "m3"]);
      // data from before the rollover is still there
      expect((await client.threads.get(threadId)).thread_id).toBe(threadId);

      const d = (await api<Deployment>("GET", `/v2/deployments/${main.id}`)).body;
      expect(d).toMatchObject({ active_revision_id: patched.body.latest_revision_id, status: "READY" });
      const revs = (await api<{ resources: Revision[] }>("GET", `/v2/deployments/${main.id}/revisions`)).body.resources;
      expect(revs.map((r) => r.id)).toEqual([patched.body.latest_revision_id, firstRevision]);
    },
    SLOW_MS,
  );

  it("a config that does not load or a graph that does not import ends BUILD_FAILED with the reason", async () => {
    const p = await pollRevision(badPath, badPath.latest_revision_id);
    expect(p.rev.status).toBe("BUILD_FAILED");
    expect(p.rev.status_message).toContain("cannot read config file");
    expect(p.rev.status_message).toContain("file not found");
    const i = await pollRevision(badImport, badImport.latest_revision_id);
    expect(i.rev.status).toBe("BUILD_FAILED");
    expect(i.rev.status_message).toContain('graph "boom"');
    expect(i.rev.status_message).toContain("boom at import");
    expect((await api<Deployment>("GET", `/v2/deployments/${badImport.id}`)).body.status).toBe("UNUSED");
  });

  it("a revision overtaken before it is built is SKIPPED; redeploy makes a new revision", async () => {
    const patch = async (v: string) =>
      (await api<Deployment>("PATCH", `/v2/deployments/${badImport.id}`, { secrets: [{ name: "V", value: v }] })).body.latest_revision_id;
    const ids = [await patch("1")];
    // while the first one builds, two more arrive: the middle one is overtaken before its turn
    await waitFor("the first patch to build", async () =>
      (await api<Revision>("GET", `/v2/deployments/${badImport.id}/revisions/${ids[0]}`)).body.status === "BUILDING" ? true : undefined,
    );
    ids.push(await patch("2"), await patch("3"));
    const [a, b, c] = await Promise.all(ids.map((id) => pollRevision(badImport, id)));
    expect(a.rev.status).toBe("BUILD_FAILED");
    expect(b.rev).toMatchObject({ status: "SKIPPED", status_message: `superseded by revision ${ids[2]} before it was deployed` });
    expect(c.rev.status).toBe("BUILD_FAILED");

    const redeployed = await api<Deployment>("POST", `/v2/deployments/${badPath.id}/revisions/${badPath.latest_revision_id}/redeploy`);
    expect(redeployed.status).toBe(200);
    expect(redeployed.body.latest_revision_id).not.toBe(badPath.latest_revision_id);
    const again = await pollRevision(badPath, redeployed.body.latest_revision_id);
    expect(again.rev.status).toBe("BUILD_FAILED");
    const missingRev = await api("POST", `/v2/deployments/${badPath.id}/revisions/${badImport.latest_revision_id}/redeploy`);
    expect(missingRev).toEqual({ status: 404, body: { detail: `Revision ID ${badImport.latest_revision_id} not found.` } });
  });

  it("lists deployments and revisions with paging and filters", async () => {
    type Page<T> = { resources: T[]; offset: number };
    const all = (await api<Page<Deployment>>("GET", "/v2/deployments")).body;
    expect(all.resources.map((d) => d.name)).toEqual(["bad-import", "bad-path", "agent-one"]);
    expect(all.offset).toBe(3);
    const p1 = (await api<Page<Deployment>>("GET", "/v2/deployments?limit=2")).body;
    expect(p1.resources.map((d) => d.name)).toEqual(["bad-import", "bad-path"]);
    const p2 = (await api<Page<Deployment>>("GET", `/v2/deployments?limit=2&offset=${p1.offset}`)).body;
    expect(p2).toMatchObject({ offset: 3, resources: [{ name: "agent-one" }] });
    expect((await api<Page<Deployment>>("GET", "/v2/deployments?name_contains=BAD")).body.resources.map((d) => d.name)).toEqual(["bad-import", "bad-path"]);
    expect((await api<Page<Deployment>>("GET", "/v2/deployments?status=READY")).body.resources.map((d) => d.name)).toEqual(["agent-one"]);
    expect((await api<Page<Deployment>>("GET", "/v2/deployments?status=UNUSED,READY&limit=1&offset=2")).body.resources.map((d) => d.name)).toEqual([
      "agent-one",
    ]);
    expect((await api<Page<Deployment>>("GET", `/v2/deployments?deployment_ids=${badPath.id}`)).body.resources.map((d) => d.name)).toEqual(["bad-path"]);
    // another tenant sees nothing
    const other = await fetch(`${cp.url}/v2/deployments/${main.id}`, { headers: { "x-tenant-id": "another-tenant" } });
    expect(other.status).toBe(404);

    const revs = (await api<Page<Revision>>("GET", `/v2/deployments/${badImport.id}/revisions?limit=2`)).body;
    expect(revs.resources).toHaveLength(2);
    expect(revs.offset).toBe(2);
    expect(revs.resources[0].id > revs.resources[1].id).toBe(true); // newest first
    const skipped = (await api<Page<Revision>>("GET", `/v2/deployments/${badImport.id}/revisions?status=SKIPPED`)).body.resources;
    expect(skipped.map((r) => r.status)).toEqual(["SKIPPED"]);
    expect((await api<Page<Revision>>("GET", `/v2/deployments/${badImport.id}/revisions?status=BUILD_FAILED,SKIPPED`)).body.resources).toHaveLength(4);
  });

  it(
    "a server that does not come up ends DEPLOY_FAILED with its output; the previous revision serves again",
    async () => {
      const active = (await api<Deployment>("GET", `/v2/deployments/${main.id}`)).body.active_revision_id!;
      // LANGGRAPH_CONFIG must be JSON: the new server exits at startup (the build does not read it)
      const patched = await api<Deployment>("PATCH", `/v2/deployments/${main.id}`, { secrets: [{ name: "LANGGRAPH_CONFIG", value: "{not json" }] });
      const { rev } = await pollRevision(main, patched.body.latest_revision_id);
      expect(rev.status).toBe("DEPLOY_FAILED");
      expect(rev.status_message).toContain("exited (code 1) before answering GET /ok");
      expect(rev.status_message).toContain("LANGGRAPH_CONFIG is not valid JSON");
      // /ok can answer this test before the supervisor's own readiness probe has: wait for both
      pidsSeen.add(await waitFor("previous revision to serve again", async () => ((await okStatus(main.url)) === 200 ? serverPid(main.id) : undefined)));
      const d = (await api<Deployment>("GET", `/v2/deployments/${main.id}`)).body;
      expect(d).toMatchObject({ active_revision_id: active, status: "READY" });
    },
    SLOW_MS,
  );

  it(
    "restarts a deployment server killed with SIGKILL",
    async () => {
      const pid = serverPid(main.id)!;
      process.kill(pid, "SIGKILL");
      const newPid = await waitFor("a new server pid", () => {
        const p = serverPid(main.id);
        return p !== undefined && p !== pid ? p : undefined;
      });
      pidsSeen.add(newPid);
      expect(await okStatus(main.url)).toBe(200);
      const d = (await api<Deployment>("GET", `/v2/deployments/${main.id}`)).body;
      expect(d.status).toBe("READY");
      const rev = (await api<Revision>("GET", `/v2/deployments/${main.id}/revisions/${d.active_revision_id}`)).body;
      expect(rev).toMatchObject({ status: "DEPLOYED", restart_count: 1 });
      expect(logs.some((l) => l.includes(`server pid ${pid} exited unexpectedly (SIGKILL)`))).toBe(true);
    },
    SLOW_MS,
  );

  it(
    "a control-plane restart relaunches the deployment on the same URL with its data",
    async () => {
      const pid = serverPid(main.id)!;
      await cp.close();
      expect(alive(pid)).toBe(false);
      expect(await okStatus(main.url)).toBe(0);
      cp = await startControlPlane(opts());
      pidsSeen.add(await waitFor("the relaunched server", async () => ((await okStatus(main.url)) === 200 ? serverPid(main.id) : undefined)));
      const d = (await api<Deployment>("GET", `/v2/deployments/${main.id}`)).body;
      expect(d).toMatchObject({ url: main.url, status: "READY" });
      const client = new Client({ apiUrl: main.url, apiKey: null });
      const state = (await client.threads.getState(threadId)).values as { messages: { content: string }[] };
      expect(state.messages.map((m) => m.content)).toEqual(["hi there", "hi there"]);
    },
    SLOW_MS,
  );

  it("DELETE stops the server and removes the records and the data", async () => {
    const pid = serverPid(main.id)!;
    const dataDir = join(dir, "deployments", main.id);
    expect(existsSync(dataDir)).toBe(true);
    const del = await fetch(`${cp.url}/v2/deployments/${main.id}`, { method: "DELETE" });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe("");
    expect(alive(pid)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
    expect((await api("GET", `/v2/deployments/${main.id}`)).status).toBe(404);
    expect((await api("GET", `/v2/deployments/${main.id}/revisions/${firstRevision}`)).status).toBe(404);
    expect((await api<{ resources: Deployment[] }>("GET", "/v2/deployments")).body.resources.map((d) => d.name)).toEqual(["bad-import", "bad-path"]);
  });
});

describe("control plane: the BUILDING step's import check", () => {
  // The graphs are compiled and imported in a child process as `troupe serve` loads them
  // (src/loader/: esbuild bundles, no tsx), so what passes the check is what a server can load.
  it("passes the example graphs and fails a TypeScript graph that does not compile, naming it", async () => {
    expect(await buildRevision(EXAMPLES_CONFIG, { env: {}, timeoutMs: 120_000, root: tenantDir })).toMatchObject({
      ok: true,
      graphs: expect.arrayContaining(["agent", "echo"]),
    });
    const broken = mkdtempSync(join(tmpdir(), "troupe-cp-broken-"));
    try {
      writeFileSync(join(broken, "graph.ts"), "export const graph = (;\n");
      writeFileSync(join(broken, "service.json"), JSON.stringify({ graphs: { broken: "./graph.ts:graph" } }));
      const result = await buildRevision(join(broken, "service.json"), { env: {}, timeoutMs: 120_000, root: broken });
      expect(result.ok).toBe(false);
      expect(!result.ok && result.message).toMatch(/graph "broken": importing .*graph\.ts failed: it does not compile: .*Unexpected/s);
    } finally {
      rmSync(broken, { recursive: true, force: true });
    }
  }, 180_000);
});
