// Errors LangGraph and LangChain throw for bad input rather than for a fault of the server: an
// update naming a node the graph does not have, a node-shaped update that is not an object, a
// message that cannot be coerced. They carry LangChain's troubleshooting code (`lc_error_code`)
// or are LangGraph's input error classes; a request that caused one gets a 400 with its message.
import { TroupeError } from "../errors.ts";

const INPUT_ERRORS = new Set(["InvalidUpdateError", "EmptyInputError", "StateGraphInputError", "GraphValueError"]);

export function isGraphInputError(err: unknown): err is Error {
  if (!(err instanceof Error) || err instanceof TroupeError) return false;
  return INPUT_ERRORS.has(err.name) || typeof (err as { lc_error_code?: unknown }).lc_error_code === "string";
}

/** Runs `fn`; a graph input error it throws becomes a BAD_REQUEST TroupeError with the same message. */
export async function asBadRequest<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isGraphInputError(err)) throw new TroupeError("BAD_REQUEST", err.message, { cause: err });
    throw err;
  }
}
