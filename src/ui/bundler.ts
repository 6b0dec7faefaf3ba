// Generative UI bundles (config `ui: {"<graph>": "./path/ui.tsx"}`, reference §12.5): each file's
// default export maps component names to React components; esbuild bundles it for the browser as
// a global `__LGUI_<name>` whose `render(component, shadowRootId)` hands the component to the
// SDK's LoadExternalComponent (the same contract as @langchain/langgraph-ui). React, the SDK and
// `ui_config.shared` stay external: the page provides them. Tailwind is not run (plain CSS imports
// are bundled).
import { dirname, relative, resolve, sep } from "node:path";
import { build } from "esbuild";

export interface UiFile {
  basename: string;
  contents: string;
}

/** What the entry point appends to the user's components (@langchain/langgraph-ui's render template). */
const RENDER_TEMPLATE = `
const STORE_SYMBOL = Symbol.for("LGUI_EXT_STORE");
function createRenderer(components) {
  return (name, shadowRootId) => {
    const root = document.getElementById(shadowRootId).shadowRoot;
    const renderEl = document.createElement("div");
    root.appendChild(renderEl);
    window[STORE_SYMBOL].respond(shadowRootId, components[name], renderEl);
  };
}
`;

/** The global the bundle assigns: `__LGUI_` + the name with every non-alphanumeric as `_`. */
export const uiGlobalName = (name: string): string => `__LGUI_${name.replace(/[^a-zA-Z0-9]/g, "_")}`;

export async function bundleUi(name: string, userPath: string, projectDir: string, shared: readonly string[]): Promise<UiFile[]> {
  let entryImport = relative(projectDir, userPath).split(sep).join("/");
  if (!entryImport.startsWith(".")) entryImport = `./${entryImport}`;
  const result = await build({
    write: false,
    outdir: resolve(projectDir, "dist"),
    entryPoints: ["entrypoint"],
    bundle: true,
    platform: "browser",
    target: "es2020",
    jsx: "automatic",
    logLevel: "silent",
    external: ["react", "react-dom", "@langchain/langgraph-sdk", "@langchain/langgraph-sdk/react-ui", ...shared],
    globalName: uiGlobalName(name),
    plugins: [
      {
        name: "entrypoint",
        setup(b) {
          b.onResolve({ filter: /^entrypoint$/ }, () => ({ path: resolve(dirname(userPath), "ui.entrypoint.tsx"), namespace: "entrypoint-ns" }));
          b.onLoad({ filter: /.*/, namespace: "entrypoint-ns" }, () => ({
            resolveDir: projectDir,
            contents: `import ui from ${JSON.stringify(entryImport)};\n${RENDER_TEMPLATE}\nexport const render = createRenderer(ui);\n`,
            loader: "tsx",
          }));
        },
      },
    ],
  });
  return (result.outputFiles ?? []).map((f) => {
    const basename = f.path.split(sep).pop() ?? f.path;
    // externals are required through the host page's loader, not a global `require`
    const contents =
      basename === "entrypoint.js"
        ? f.text.replaceAll(
            `typeof require !== "undefined" ? require`,
            `typeof globalThis[Symbol.for("LGUI_REQUIRE")] !== "undefined" ? globalThis[Symbol.for("LGUI_REQUIRE")]`,
          )
        : f.text;
    return { basename, contents };
  });
}
