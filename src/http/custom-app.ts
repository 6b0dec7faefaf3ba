// `http.app` (reference §12.1): the user's Hono app (or any object with `fetch(Request)` and a
// Hono-style `routes` list) mounted before the built-in routes: a request matching one of its
// routes is answered by it, after CORS, rate limits, API keys and custom auth (reference §11.3),
// everything else falls through to the built-ins. Differences from upstream (docs in README): the
// app's global middleware (`app.use("*")`) wraps only its own routes, and its responses are
// buffered (a streaming response arrives whole).
import { ConfigError, type ImportRef } from "../config/index.ts";
import type { Guard, RawRequest } from "./dispatch.ts";
import type { Reply } from "./types.ts";
import { importUserModule } from "../loader/user-modules.ts";

interface FetchApp {
  fetch(request: Request): Response | Promise<Response>;
  routes?: { method: string; path: string }[];
}

interface RouteMatcher {
  method: string;
  pattern: RegExp;
}

/** Hono path syntax → RegExp: `:name` (optionally `:name{regex}`) is one segment, `*` anything. */
export function pathPattern(path: string): RegExp {
  let re = "";
  for (let i = 0; i < path.length; ) {
    const c = path[i];
    if (c === ":") {
      const m = /^:([A-Za-z0-9_]+)(\{([^}]*)\})?(\?)?/.exec(path.slice(i));
      if (!m) {
        re += ":";
        i++;
        continue;
      }
      const segment = m[3] ? `(?:${m[3]})` : "[^/]+";
      if (m[4] && re.endsWith("/")) re = `${re.slice(0, -1)}(?:/${segment})?`; // "/a/:id?" also matches "/a"
      else re += m[4] ? `(?:${segment})?` : segment;
      i += m[0].length;
    } else if (c === "*") {
      re += ".*";
      i++;
    } else {
      re += c.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
      i++;
    }
  }
  return new RegExp(`^${re}/?$`);
}

export async function loadCustomApp(ref: ImportRef, configPath: string): Promise<FetchApp> {
  const fail = (message: string, cause?: unknown): never => {
    throw new ConfigError(configPath, [{ key: "http.app", message }], { cause });
  };
  let mod: Record<string, unknown> = {};
  try {
    mod = await importUserModule(ref.filePath);
  } catch (err) {
    fail(`could not import ${ref.filePath}: ${err instanceof Error ? err.message : String(err)}`, err);
  }
  const app = mod[ref.exportName] as FetchApp | undefined;
  if (!app || typeof app.fetch !== "function") fail(`export "${ref.exportName}" of ${ref.filePath} is not a Hono app (an object with fetch(request))`);
  return app as FetchApp;
}

/** The guard answering requests that match one of the app's routes. */
export function customAppGuard(app: FetchApp): Guard {
  const routes: RouteMatcher[] = (app.routes ?? [])
    .filter((r) => r.path !== "*" && r.path !== "/*") // global middleware, not a route
    .map((r) => ({ method: r.method.toUpperCase(), pattern: pathPattern(r.path) }));
  return async (req) => {
    if (!routes.some((r) => (r.method === "ALL" || r.method === req.method || (req.method === "HEAD" && r.method === "GET")) && r.pattern.test(req.path))) return undefined;
    return toReply(await app.fetch(toRequest(req)));
  };
}

function toRequest(req: RawRequest): Request {
  const url = `http://${req.headers.host ?? "localhost"}${req.path}${req.query ? `?${req.query}` : ""}`;
  const hasBody = req.body !== null && req.method !== "GET" && req.method !== "HEAD";
  return new Request(url, { method: req.method, headers: req.headers, body: hasBody ? new Uint8Array(req.body!) : undefined, signal: req.signal });
}

async function toReply(res: Response): Promise<Reply> {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (name !== "content-type" && name !== "content-length") headers[name] = value;
  });
  const body = new Uint8Array(await res.arrayBuffer());
  if (body.byteLength === 0 && (res.status === 204 || res.status === 202)) return { kind: "empty", status: res.status, headers };
  return { kind: "text", status: res.status, contentType: res.headers.get("content-type") ?? "application/octet-stream", body, headers };
}
