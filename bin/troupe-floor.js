#!/usr/bin/env node
// Launcher for the in-process floor measurement (bench/floor.ts): registers tsx so the TypeScript runs as is.
import { register } from "tsx/esm/api";

register();
await import("../bench/floor.ts");
