// Custom auth (`auth.path` naming an SDK `Auth` object, reference §11): the public surface the
// server and the route modules use.
export { loadAuth, type LoadAuthOptions } from "./load.ts";
export { AuthRuntime, type AuthRuntimeOptions } from "./runtime.ts";
export { customAuthGuard, isAuthExempt } from "./guard.ts";
export { asMetadata, matchesAuthFilter } from "./filter.ts";
export { addAuthUserFields, isServerDefault } from "./run-access.ts";
export { StoreAccess, MAX_SCAN } from "./store-access.ts";
export { AuthHttpError } from "./http-error.ts";
export type { AuthEvent, AuthFilter, AuthUser } from "./types.ts";
