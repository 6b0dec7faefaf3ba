// Errors LangGraph and LangChain throw for bad input rather than for a fault of the server: an
// update naming a node the graph does not have, a node-shaped update that is not an object, a
// message that cannot be coerced. They carry LangChain's troubleshooting code (`lc_error_code`)
// or are LangGraph's input error classes; a request that caused one gets a 400 with its message.
// A few state-update checks throw a plain Error instead; they are recognised by their message.
import { TroupeError } from "../errors.ts";

const INPUT_ERRORS = new Set(["InvalidUpdateError", "EmptyInputError", "StateGraphInputError", "GraphValueError"]);
/** plain Errors of Pregel.bulkUpdateState/updateState about the request (an empty superstep, an unknown checkpoint_ns) */
const INPUT_MESSAGES = /^(No supersteps provided|No updates provided|Subgraph ".*" not found)$/s;

export function isGraphInputError(err: unknown): err is Error {
  if (!(err instanceof Error) || err instanceof TroupeError) return false;
  if (INPUT_ERRORS.has(err.name) || typeof (err as { lc_error_code?: unknown }).lc_error_code === "string") return true;
  return err.name === "Error" && INPUT_MESSAGES.test(err.message);
}

/**
 * Runs `fn`; a graph input error it throws becomes a BAD_REQUEST TroupeError with the same message.
 * `inferredNode`: the update names no node, so LangGraph infers it from the checkpoint's
 * versions_seen; it fails with a TypeError where nothing was seen by any node (e.g. after a run that
 * only applied a `command.update`), which is LangGraph's "Ambiguous update" case.
 */
export async function asBadRequest<T>(fn: () => Promise<T>, opts: { inferredNode?: boolean } = {}): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isGraphInputError(err)) throw new TroupeError("BAD_REQUEST", err.message, { cause: err });
    if (opts.inferredNode && err instanceof TypeError) {
      throw new TroupeError("BAD_REQUEST", 'Ambiguous update, specify "as_node": no node of the graph has written the state this update applies to', {
        cause: err,
      });
    }
    throw err;
  }
}
