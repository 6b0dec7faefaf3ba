// Lint rails (CONTRIBUTING.md): no `any`, and the layer boundaries the folders promise.
import tseslint from "typescript-eslint";

/** A folder's forbidden imports: relative specifiers that reach into those folders. */
const forbid = (folders, why, allowTypeImports = false) => ({
  "@typescript-eslint/no-restricted-imports": [
    "error",
    { patterns: folders.map((f) => ({ group: [`**/${f}/*`, `**/${f}`], message: why, allowTypeImports })) },
  ],
});

export default tseslint.config(
  { ignores: ["node_modules/**", "bench/out/**", "test/fixtures/compiled/**", "**/*.d.ts", "native/**", "build/**"] },
  { files: ["**/*.ts"], extends: [tseslint.configs.base] },
  // tests may read loosely typed wire payloads as they like; the product code may not
  { files: ["src/**/*.ts", "workers/**/*.ts", "bench/**/*.ts", "bin/**/*.ts"], rules: { "@typescript-eslint/no-explicit-any": "error" } },
  // the layer table of CONTRIBUTING.md
  {
    files: ["src/http/**/*.ts"],
    rules: forbid(["api", "actors", "storage", "hub"], "the HTTP front end knows requests and replies, not endpoints, actors or storage"),
  },
  { files: ["src/api/**/*.ts"], rules: forbid(["actors"], "handlers reach the runtime through hub/shard-pool, never into the actor threads") },
  { files: ["src/hub/**/*.ts"], rules: forbid(["api", "actors"], "the hub is the HTTP thread's side of the runtime: it talks to actors through the bridge") },
  { files: ["src/actors/**/*.ts"], rules: forbid(["api", "hub", "http"], "actors run on worker threads: they know the bridge, not the HTTP thread") },
  { files: ["src/bridge/**/*.ts"], rules: forbid(["api", "hub", "actors"], "the bridge is shared by both sides of the thread boundary") },
  {
    files: ["src/domain/**/*.ts"],
    rules: forbid(["actors", "api", "http", "hub", "storage"], "domain rules are pure: no threads, routes or storage (record types only)", true),
  },
  { files: ["src/storage/**/*.ts"], rules: forbid(["actors", "api", "http", "hub"], "storage is the bottom layer: it knows no thread, route or handler") },
  {
    files: ["src/crons/**/*.ts", "src/ttl/**/*.ts", "src/webhooks/**/*.ts"],
    rules: forbid(["api"], "they get what they run through their own interfaces (e.g. CronRunner), not from the API layer"),
  },
  { files: ["src/schemas/**/*.ts"], rules: forbid(["api", "actors", "hub"], "schema extraction serves the API; it does not call it", true) },
);
