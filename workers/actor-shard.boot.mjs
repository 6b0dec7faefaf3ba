// Piscina loads this plain-JS file; it registers tsx in the worker thread before importing the
// TypeScript entry (execArgv --import hooks are not reliably active in time for worker entries).
import { register } from "tsx/esm/api";

register();
const entry = await import(new URL("./actor-shard.ts", import.meta.url).href);
export default entry.default;
