// Path matching compiled once at startup: a segment trie where static segments win over
// :params, so /threads/search and /threads/:thread_id never compete. Paths of routes without
// params are also looked up whole first (GET /ok, POST /threads/search …): one map lookup instead
// of splitting the path and walking the trie.
import type { RouteDef } from "./types.ts";

interface Node {
  statics: Map<string, Node>;
  param?: { name: string; node: Node };
  routes: Map<string, RouteDef>;
}

const newNode = (): Node => ({ statics: new Map(), routes: new Map() });

export interface RouteMatch {
  route: RouteDef;
  params: Record<string, string>;
}

export type MatchResult = RouteMatch | { notFound: true } | { methodNotAllowed: string[] };

export class Router {
  private readonly root = newNode();
  /** path → method → route, for the routes without params */
  private readonly exact = new Map<string, Map<string, RouteDef>>();
  readonly routes: RouteDef[] = [];

  add(route: RouteDef): void {
    let node = this.root;
    for (const seg of split(route.path)) {
      if (seg.startsWith(":")) {
        const name = seg.slice(1);
        if (node.param && node.param.name !== name) {
          throw new Error(`route ${route.method} ${route.path}: param :${name} conflicts with :${node.param.name}`);
        }
        node.param ??= { name, node: newNode() };
        node = node.param.node;
      } else {
        let next = node.statics.get(seg);
        if (!next) node.statics.set(seg, (next = newNode()));
        node = next;
      }
    }
    if (node.routes.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
    node.routes.set(route.method, route);
    this.routes.push(route);
    if (!route.path.includes(":")) {
      let byMethod = this.exact.get(route.path);
      if (byMethod === undefined) this.exact.set(route.path, (byMethod = new Map()));
      byMethod.set(route.method, route);
    }
  }

  match(method: string, path: string): MatchResult {
    // the trie's answer too: a whole static path wins over params; otherwise (another method, a
    // trailing slash) the trie decides
    const exact = this.exact.get(path)?.get(method);
    if (exact !== undefined) return { route: exact, params: {} };
    const segs = split(path);
    const params: Record<string, string> = {};
    const node = walk(this.root, segs, 0, params);
    if (!node) return { notFound: true };
    const route = node.routes.get(method) ?? (method === "HEAD" ? node.routes.get("GET") : undefined);
    if (!route) return { methodNotAllowed: [...node.routes.keys()] };
    return { route, params };
  }
}

function walk(node: Node, segs: string[], i: number, params: Record<string, string>): Node | undefined {
  if (i === segs.length) return node.routes.size > 0 ? node : undefined;
  const seg = segs[i];
  const st = node.statics.get(seg);
  if (st) {
    const found = walk(st, segs, i + 1, params);
    if (found) return found;
  }
  if (node.param && seg.length > 0) {
    const found = walk(node.param.node, segs, i + 1, params);
    if (found) {
      params[node.param.name] = safeDecode(seg);
      return found;
    }
  }
  return undefined;
}

function split(path: string): string[] {
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  return trimmed === "/" ? [] : trimmed.slice(1).split("/");
}

function safeDecode(s: string): string {
  if (!s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
