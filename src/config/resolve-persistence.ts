// Resolves the `store` (semantic index, item TTL) and `checkpointer` (thread TTL) blocks; TTLs are
// in minutes as upstream has them, null meaning "never" / "no sweep".

import { DEFAULTS } from "./defaults.ts";
import { resolveImportRef } from "./import-ref.ts";
import type { ResolveContext } from "./context.ts";
import type { RawConfig, ResolvedCheckpointerConfig, ResolvedEmbed, ResolvedStoreConfig } from "./types.ts";

/** `"provider:model"` (e.g. `openai:text-embedding-3-small`) or a module `"./embed.ts:fn"`. */
function resolveEmbed(spec: string, ctx: ResolveContext): ResolvedEmbed | null {
  const key = ["store", "index", "embed"];
  if (spec.startsWith(".") || spec.startsWith("/")) {
    const r = resolveImportRef(spec, ctx.dir);
    if (r.ok) return { kind: "module", ...r.ref };
    ctx.out.error(key, r.problem);
    return null;
  }
  const colon = spec.indexOf(":");
  const provider = spec.slice(0, colon);
  const model = spec.slice(colon + 1);
  if (colon <= 0 || model === "") {
    ctx.out.error(key, `must be "provider:model" or "./file.ts:export" — got ${JSON.stringify(spec)}`);
    return null;
  }
  return { kind: "provider", provider, model };
}

export function resolveStore(raw: RawConfig["store"], ctx: ResolveContext): ResolvedStoreConfig {
  const index = raw?.index;
  const embed = index ? resolveEmbed(index.embed, ctx) : null;
  return {
    index: index && embed ? { dims: index.dims, embed, fields: [...(index.fields ?? DEFAULTS.store.indexFields)] } : null,
    ttl: {
      refreshOnRead: raw?.ttl?.refresh_on_read ?? DEFAULTS.store.refreshOnRead,
      defaultTtlMinutes: raw?.ttl?.default_ttl ?? null,
      sweepIntervalMinutes: raw?.ttl?.sweep_interval_minutes ?? null,
    },
  };
}

export function resolveCheckpointer(raw: RawConfig["checkpointer"]): ResolvedCheckpointerConfig {
  const ttl = raw?.ttl;
  return {
    ttl: {
      strategy: ttl?.strategy ?? DEFAULTS.checkpointer.strategy,
      defaultTtlMinutes: ttl?.default_ttl ?? null,
      sweepIntervalMinutes: ttl?.sweep_interval_minutes ?? DEFAULTS.checkpointer.sweepIntervalMinutes,
      sweepLimit: ttl?.sweep_limit ?? DEFAULTS.checkpointer.sweepLimit,
    },
  };
}
