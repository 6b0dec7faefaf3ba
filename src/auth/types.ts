// Shapes of the custom-auth contract (`@langchain/langgraph-sdk/auth`, reference §11.1) as the
// server sees them: the Auth object's handler cache, the normalized user, events and filters.

/** Every operation the server fires a handler for (reference §11.2). */
export type AuthEvent =
  | "threads:create"
  | "threads:read"
  | "threads:update"
  | "threads:delete"
  | "threads:search"
  | "threads:create_run"
  | "assistants:create"
  | "assistants:read"
  | "assistants:update"
  | "assistants:delete"
  | "assistants:search"
  | "crons:create"
  | "crons:read"
  | "crons:update"
  | "crons:delete"
  | "crons:search"
  | "store:put"
  | "store:get"
  | "store:delete"
  | "store:search"
  | "store:list_namespaces";

/** The user object handlers receive and runs see as `configurable.langgraph_auth_user`. */
export interface AuthUser {
  identity: string;
  permissions: string[];
  is_authenticated: boolean;
  display_name: string;
  [field: string]: unknown;
}

/** What `auth.on(...)` callbacks are called with. */
export interface AuthHandlerArg {
  event: AuthEvent;
  resource: string;
  action: string;
  /** the operation payload; changes the handler makes are applied by the server */
  value: object;
  user: AuthUser;
  permissions: string[];
}

/** `{key: v}`, `{key: {$eq: v}}` or `{key: {$contains: v | v[]}}`, all keys must match. */
export type AuthFilter = Record<string, unknown>;

export type AuthenticateFn = (request: Request) => unknown;
export type AuthHandlerFn = (arg: AuthHandlerArg) => unknown;

/** The `~handlerCache` property of an SDK `Auth` instance: how the server recognises one. */
export interface AuthHandlerCache {
  authenticate?: AuthenticateFn;
  callbacks?: Record<string, AuthHandlerFn>;
}
