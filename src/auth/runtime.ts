// The loaded `Auth` object at work: authenticate a request into a user, and run the handler an
// operation fires (lookup `resource:action`, `resource`, `*:action`, `*`) to allow, deny or filter.
import type { RawRequest } from "../http/dispatch.ts";
import type { AuthInfo, Reply, RouteDef } from "../http/types.ts";
import type { CreateRunCommand } from "../bridge/messages.ts";
import type { AssistantRecord, ThreadRecord } from "../storage/records.ts";
import { AuthHttpError, fromThrown } from "./http-error.ts";
import { authorizeAssistantUse, authorizeRunCreate } from "./run-access.ts";
import type { AuthEvent, AuthFilter, AuthHandlerCache, AuthHandlerFn, AuthUser } from "./types.ts";
import { normalizeUser, userOf } from "./user.ts";
import { toWebRequest } from "./web-request.ts";

export interface AuthRuntimeOptions {
  /**
   * Requests with `x-auth-scheme: langsmith` act as the Studio user without credentials: on for
   * `troupe dev` (loopback) or with `auth.allow_studio_on_serve`, off with `auth.disable_studio_auth`.
   * Off, they authenticate like any other request.
   */
  studioHeader: boolean;
}

export class AuthRuntime {
  constructor(
    private readonly cache: AuthHandlerCache,
    readonly opts: AuthRuntimeOptions,
  ) {}

  /** Without an `authenticate` callback nothing is enforced (reference §11.1). */
  get authenticates(): boolean {
    return typeof this.cache.authenticate === "function";
  }

  /** Runs the user's `authenticate`; HTTPException → AuthHttpError, a bad result → 500. */
  async authenticate(req: RawRequest): Promise<AuthUser> {
    const fn = this.cache.authenticate;
    if (!fn) throw new AuthHttpError(500, "No authenticate handler registered");
    let returned: unknown;
    try {
      returned = await fn(toWebRequest(req));
    } catch (err) {
      throw fromThrown(err);
    }
    return normalizeUser(returned);
  }

  /**
   * Fires `event` for an authenticated request. `value` is handed to the handler as is, so the
   * caller reads back whatever the handler changed. Returns the filter to apply (undefined = none);
   * throws AuthHttpError for `false` (403), an HTTPException (its status) or a bad result (500).
   */
  async authorize(info: AuthInfo | undefined, event: AuthEvent, value: object): Promise<AuthFilter | undefined> {
    if (!info) return undefined;
    const handler = this.handlerFor(event);
    if (!handler) return undefined;
    const sep = event.indexOf(":");
    const user = userOf(info);
    let result: unknown;
    try {
      result = await handler({ event, resource: event.slice(0, sep), action: event.slice(sep + 1), value, user, permissions: user.permissions });
    } catch (err) {
      throw fromThrown(err);
    }
    if (result === undefined || result === null || result === true) return undefined;
    if (result === false) throw new AuthHttpError(403, "Forbidden");
    if (typeof result !== "object" || Array.isArray(result)) {
      throw new AuthHttpError(
        500,
        `Auth handler returned invalid result. Expected filter object, null, undefined or boolean. Got "${Array.isArray(result) ? "array" : typeof result}" instead.`,
      );
    }
    return Object.keys(result).length > 0 ? (result as AuthFilter) : undefined;
  }

  /** `threads:create_run` for a run about to be created (may change cmd.metadata; 404 on a hidden thread). */
  authorizeRun(info: AuthInfo | undefined, cmd: CreateRunCommand, threadOf: (threadId: string) => Promise<ThreadRecord | undefined>): Promise<void> {
    return authorizeRunCreate(this, info, cmd, threadOf);
  }

  /** 404 unless the caller may run `assistant` (see authorizeAssistantUse). */
  authorizeAssistant(info: AuthInfo | undefined, assistant: AssistantRecord): Promise<void> {
    return authorizeAssistantUse(this, info, assistant);
  }

  /** Wraps route handlers so auth errors go out with the exact status the user's code chose. */
  exactErrors<R extends RouteDef>(routes: R[]): R[] {
    return routes.map((def) => ({
      ...def,
      handler: async (ctx: Parameters<R["handler"]>[0]): Promise<Reply> => {
        try {
          return await def.handler(ctx);
        } catch (err) {
          if (err instanceof AuthHttpError) return err.reply();
          throw err;
        }
      },
    }));
  }

  private handlerFor(event: AuthEvent): AuthHandlerFn | undefined {
    const callbacks = this.cache.callbacks;
    if (!callbacks) return undefined;
    const sep = event.indexOf(":");
    for (const key of [event, event.slice(0, sep), `*:${event.slice(sep + 1)}`, "*"]) {
      if (Object.hasOwn(callbacks, key) && typeof callbacks[key] === "function") return callbacks[key];
    }
    return undefined;
  }
}
