// `troupe keys …`: manages API keys directly in the control plane's LMDB files. This is how the
// first key of an organization comes to exist (no key is needed to run it: access to the data
// directory is the authority). Safe to run while a control plane is serving the same directory.
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import { openControlPlaneStorage } from "../storage.ts";
import { AuthStore, DEFAULT_USER } from "./store.ts";
import { isParseArgsError, wantsHelp } from "../../cli-usage.ts";

export const KEYS_USAGE = `troupe keys — API keys of the control plane

Usage:
  troupe keys create --org NAME [--user NAME] [--description TEXT] [--data-dir DIR] [--json]
  troupe keys list   --org NAME [--data-dir DIR] [--json]
  troupe keys revoke PREFIX --org NAME [--data-dir DIR]

  --org NAME        organization (tenant) name or id; create makes it when missing
  --user NAME       user the key belongs to (default "${DEFAULT_USER}"; created when missing)
  --data-dir DIR    control plane data directory (default $TROUPE_CONTROL_PLANE_DIR, else ./.troupe-control-plane)
  --json            machine-readable output
The key is printed once by create and cannot be shown again: only its hash is stored.
`;

export const defaultControlPlaneDir = (): string => resolve(process.env.TROUPE_CONTROL_PLANE_DIR ?? ".troupe-control-plane");

/** Runs one `keys` subcommand; returns the process exit code (errors are printed, not thrown). */
export async function runKeysCommand(argv: string[], out: (s: string) => void = (s) => process.stdout.write(s)): Promise<number> {
  try {
    return await keys(argv, out);
  } catch (err) {
    process.stderr.write(`troupe keys: ${err instanceof Error ? err.message : String(err)}\n`);
    return isParseArgsError(err) ? 2 : 1;
  }
}

async function keys(argv: string[], out: (s: string) => void): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === "--help" || sub === "-h" || !["create", "list", "revoke"].includes(sub) || wantsHelp(rest)) {
    out(KEYS_USAGE);
    return sub && sub !== "--help" && sub !== "-h" && !wantsHelp(rest) ? 2 : 0;
  }
  const { values, positionals } = parseArgs({
    args: rest,
    options: { org: { type: "string" }, user: { type: "string" }, description: { type: "string" }, "data-dir": { type: "string" }, json: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  if (!values.org) throw new Error("--org is required");
  const storage = openControlPlaneStorage(values["data-dir"] ? resolve(values["data-dir"]) : defaultControlPlaneDir());
  try {
    const store = new AuthStore(storage);
    if (sub === "create") {
      const org = store.findOrg(values.org) ?? (await store.ensureOrg(values.org)).org;
      const user = await store.ensureUser(org.id, values.user ?? DEFAULT_USER);
      const { key, record } = await store.createKey(org.id, user.id, values.description ?? null);
      const view = { key, prefix: record.prefix, org_id: org.id, org_name: org.name, user_id: user.id, user_name: user.name, created_at: record.created_at };
      if (values.json) out(JSON.stringify(view) + "\n");
      else out(`API key for organization "${org.name}" (${org.id}), user "${user.name}" (${user.id}):\n${key}\nStore it now: it is not shown again.\n`);
      return 0;
    }
    const org = store.findOrg(values.org);
    if (!org) throw new Error(`organization "${values.org}" not found`);
    if (sub === "list") {
      const keys = store.listKeys(org.id);
      if (values.json) out(JSON.stringify(keys) + "\n");
      else
        for (const k of keys)
          out(
            `${k.prefix}…  user=${k.user_name ?? k.user_id}  created=${k.created_at}${k.revoked_at ? `  REVOKED ${k.revoked_at}` : ""}${k.description ? `  ${k.description}` : ""}\n`,
          );
      return 0;
    }
    const prefix = positionals[0];
    if (!prefix) throw new Error("revoke needs the key prefix (see `troupe keys list`)");
    const rec = await store.revokeKey(org.id, prefix);
    out(`revoked ${rec.prefix}… at ${rec.revoked_at}\n`);
    return 0;
  } finally {
    await storage.close();
  }
}
