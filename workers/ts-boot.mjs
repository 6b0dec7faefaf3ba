// Boots a TypeScript worker entry: registers tsx in this thread, then imports the entry named in
// workerData.entry. (A plain Worker on a .ts file does not get --import hooks early enough.)
import { workerData } from "node:worker_threads";
import { register } from "tsx/esm/api";

register();
await import(workerData.entry);
