// Preload for worker threads (`execArgv: ["--import", TSX_REGISTER]`): on Node 20, `--import tsx`
// registers tsx's hooks only on the main thread, so a worker must register them itself.
import { register } from "tsx/esm/api";

register();
