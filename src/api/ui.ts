// Generative UI routes (reference §12.5; SDK `client["~ui"].getComponent`, LoadExternalComponent):
//   POST /ui/{name} {name: component} → an HTML snippet loading the graph's UI bundle
//   GET  /ui/{name}/{file}             → a file of that bundle
// Bundles are built on first use (src/ui/bundler.ts) and kept. Errors are JSON, as everywhere.
import { TroupeError, notFound } from "../errors.ts";
import { body, str } from "../http/schemas/common.ts";
import { route, type RouteDef, type TextReply } from "../http/types.ts";
import type { AppContext } from "../server/context.ts";
import { bundleUi, uiGlobalName, type UiFile } from "../ui/bundler.ts";

const TAG = "ui";
const MIME: Record<string, string> = { ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".map": "application/json" };
const extOf = (basename: string): string => basename.slice(basename.lastIndexOf("."));
const ATTRIBUTE_ESCAPES: Record<string, string> = { "&": "&amp;", "'": "&#39;", '"': "&quot;", "<": "&lt;", ">": "&gt;" };
/**
 * Text for an HTML attribute quoted with `quote`; the other quote character stays as it is, so a
 * plain component name keeps the snippet upstream sends (the SDK's loader replaces
 * `"{{shadowRootId}}"` in the text before parsing it).
 */
const attribute = (text: string, quote: "'" | '"'): string => text.replace(quote === "'" ? /[&'<>]/g : /[&"<>]/g, (c) => ATTRIBUTE_ESCAPES[c]);

export function uiRoutes(app: AppContext): RouteDef[] {
  const { ui, uiConfig, configDir } = app.config;
  const bundles = new Map<string, Promise<UiFile[]>>();

  /** The UI's name: a graph id with a `ui` entry, or an assistant of such a graph. */
  const uiName = async (agent: string): Promise<string | undefined> => {
    if (Object.hasOwn(ui, agent)) return agent;
    try {
      const graphId = (await app.resolveAssistant(agent)).graph_id;
      return Object.hasOwn(ui, graphId) ? graphId : undefined;
    } catch {
      return undefined;
    }
  };

  const filesOf = (name: string): Promise<UiFile[]> => {
    let p = bundles.get(name);
    if (!p) {
      p = bundleUi(name, ui[name], configDir, uiConfig.shared).catch((err: unknown) => {
        bundles.delete(name); // a fixed file can be tried again
        throw new TroupeError("INTERNAL", `UI bundle of "${name}" (${ui[name]}) failed: ${(err as Error).message}`);
      });
      bundles.set(name, p);
    }
    return p;
  };

  return [
    route({
      method: "POST",
      path: "/ui/:agent",
      operationId: "get_ui_component",
      summary: "HTML that loads a graph's generative UI bundle and renders one component",
      tag: TAG,
      params: { agent: "string" },
      body: body({ name: str }, ["name"]),
      response: { status: 200, contentType: "text/html" },
      handler: async ({ params, body: b, headers }): Promise<TextReply> => {
        const name = await uiName(params.agent);
        if (name === undefined) throw notFound(`UI not found for agent "${params.agent}"`);
        const files = await filesOf(name);
        const host = headers.host ?? "";
        const local = ["localhost", "127.0.0.1"].some((h) => host === h || host.startsWith(`${h}:`));
        const origin = `${local ? "http:" : ""}//${host}`;
        const href = (file: UiFile) => attribute(`${origin}/ui/${name}/${file.basename}`, '"');
        const lines = files.filter((f) => extOf(f.basename) === ".css").map((f) => `<link rel="stylesheet" href="${href(f)}" />`);
        const js = files.find((f) => extOf(f.basename) === ".js");
        // the component name is the caller's: a JS string inside an HTML attribute, escaped for both
        const component = JSON.stringify(b.name);
        if (js) lines.push(`<script src="${href(js)}" onload='${attribute(`${uiGlobalName(name)}.render(${component}, "{{shadowRootId}}")`, "'")}'></script>`);
        return { kind: "text", status: 200, contentType: "text/html; charset=utf-8", body: lines.join("\n") };
      },
    }),
    route({
      method: "GET",
      path: "/ui/:agent/:basename",
      operationId: "get_ui_file",
      summary: "A file of a graph's generative UI bundle",
      tag: TAG,
      params: { agent: "string", basename: "string" },
      handler: async ({ params }): Promise<TextReply> => {
        const name = await uiName(params.agent);
        const file = name === undefined ? undefined : (await filesOf(name)).find((f) => f.basename === params.basename);
        if (!file) throw notFound(`File not found: /ui/${params.agent}/${params.basename}`);
        return { kind: "text", status: 200, contentType: MIME[extOf(file.basename)] ?? "text/plain; charset=utf-8", body: file.contents };
      },
    }),
  ];
}
