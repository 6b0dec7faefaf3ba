// tsx for the few places that still load TypeScript through loader hooks (the server itself runs
// compiled code, src/loader/): the webhook worker when a test starts it without a compiled entry.
// Pass `execArgv: ["--import", TSX_REGISTER]`. Plain `--import tsx` is not enough on Node 20: tsx 4
// registers its hooks on the main thread only, so each worker registers them itself.
export const TSX_REGISTER = new URL("../../workers/tsx-register.mjs", import.meta.url).href;
