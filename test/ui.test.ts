// Generative UI (reference §12.5) against a spawned server: the SDK's getComponent snippet, the
// bundle files it names, and JSON 404s for unknown UIs and files.
import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { rawRequest, useServer } from "./helpers/suite.ts";

const fx = useServer();

/** fetch cannot set Host: a plain node:http request can. */
function postWithHost(url: string, host: string, body: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers: { host, "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

describe("generative UI", () => {
  it("answers the SDK's getComponent with a snippet that loads the graph's bundle, and serves its files", async () => {
    // what LoadExternalComponent calls: the client's internal UI client
    const client = new Client({ apiUrl: fx.server.url, apiKey: null });
    const ui = (client as unknown as { "~ui": { getComponent(assistantId: string, name: string): Promise<string> } })["~ui"];
    const html = await ui.getComponent("agent", "weather");
    const port = new URL(fx.server.url).port;
    expect(html).toContain(`<link rel="stylesheet" href="http://127.0.0.1:${port}/ui/agent/entrypoint.css" />`);
    expect(html).toContain(
      `<script src="http://127.0.0.1:${port}/ui/agent/entrypoint.js" onload='__LGUI_agent.render("weather", "{{shadowRootId}}")'></script>`,
    );

    const js = await fetch(`${fx.server.url}/ui/agent/entrypoint.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toContain("text/javascript");
    const code = await js.text();
    expect(code).toContain("var __LGUI_agent");
    expect(code).toContain("weather-card");
    expect(code).toContain('globalThis[Symbol.for("LGUI_REQUIRE")]'); // react is the page's
    expect(code).not.toContain("useState(");
    const css = await fetch(`${fx.server.url}/ui/agent/entrypoint.css`);
    expect(css.headers.get("content-type")).toContain("text/css");
    expect(await css.text()).toContain(".weather-card");

    // an assistant of the graph names the same UI; a non-local host gets a protocol-relative URL
    const assistant = (await fx.client.assistants.search({ graphId: "agent" }))[0];
    const viaAssistant = await postWithHost(`${fx.server.url}/ui/${assistant.assistant_id}`, "ui.example.com", { name: "weather" });
    expect(viaAssistant.status).toBe(200);
    expect(viaAssistant.text).toContain(`<script src="//ui.example.com/ui/agent/entrypoint.js"`);
  });

  it("escapes the component name so it cannot break out of the onload attribute", async () => {
    const name = `x', 1); alert(document.cookie); ('<b>&amp;`;
    const res = await postWithHost(`${fx.server.url}/ui/agent`, `127.0.0.1:${new URL(fx.server.url).port}`, { name });
    expect(res.status).toBe(200);
    const onload = /onload='([^']*)'/.exec(res.text)?.[1];
    // what a browser's HTML parser hands to the script: the name arrives as one JS string
    const decoded = onload?.replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
    expect(decoded).toBe(`__LGUI_agent.render(${JSON.stringify(name)}, "{{shadowRootId}}")`);
    expect(res.text).not.toContain("<b>");
    // a Host header cannot break out of the href attributes either
    const evil = await postWithHost(`${fx.server.url}/ui/agent`, `h"onerror="x`, { name: "weather" });
    expect(evil.text).not.toContain(`h"onerror`);
    expect(evil.text).toContain(`href="//h&quot;onerror=&quot;x/ui/agent/entrypoint.css"`);
  });

  it("answers JSON errors: unknown UI or file 404, a body without name 422", async () => {
    const post = (path: string, body: unknown) =>
      rawRequest(fx.server.url, path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect(await post("/ui/echo", { name: "x" })).toMatchObject({ status: 404, body: { detail: 'UI not found for agent "echo"' } });
    expect(await rawRequest(fx.server.url, "/ui/agent/nope.js")).toMatchObject({ status: 404, body: { detail: "File not found: /ui/agent/nope.js" } });
    expect((await post("/ui/agent", {})).status).toBe(422);
  });
});
