// The one-line protocol between the BUILDING step (build.ts) and its child process (build-check.ts).
export const RESULT_MARKER = "TROUPE_BUILD_RESULT ";

export type BuildCheckResult = { ok: true; graphs: string[] } | { ok: false; message: string };

/** First argument of the child process: build-check.ts refuses to run without it. */
export const CHILD_FLAG = "--troupe-build-check";
