// Worker threads load TypeScript (ours and users' graph files) through tsx: pass
// `execArgv: ["--import", TSX_REGISTER]`. Plain `--import tsx` is not enough on Node 20: tsx 4
// registers its hooks on the main thread only, so each worker registers them itself.
export const TSX_REGISTER = new URL("../../workers/tsx-register.mjs", import.meta.url).href;
