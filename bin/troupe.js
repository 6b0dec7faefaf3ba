#!/usr/bin/env node
// Entry of the `troupe` command: TypeScript sources run through tsx, no build step.
import { register } from "tsx/esm/api";

register();
await import("../src/cli.ts");
