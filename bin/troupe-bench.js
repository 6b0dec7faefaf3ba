#!/usr/bin/env node
// Launcher for the load benchmark (bench/cli.ts): registers tsx so the TypeScript runs as is.
import { register } from "tsx/esm/api";

register();
await import("../bench/cli.ts");
