// `troupe migrate --from <data-dir | postgres://…> --to <data-dir | postgres://…>`: copies a
// deployment between backends (copy.ts). Stop the servers using either side first: the copy reads
// the source as it is while it runs.
import { parseArgs } from "node:util";
import { UsageError } from "../../cli-usage.ts";
import { copyDeployment } from "./copy.ts";
import type { Family, MigrationEndpoint } from "./endpoint.ts";
import { openLmdbEndpoint } from "./lmdb-endpoint.ts";
import { openPostgresEndpoint } from "./postgres-endpoint.ts";
import { ProgressBar } from "./progress-bar.ts";

const isPostgres = (where: string): boolean => /^postgres(ql)?:\/\//.test(where);

function open(where: string, schema: string | undefined, log: (line: string) => void): Promise<MigrationEndpoint> {
  return isPostgres(where) ? openPostgresEndpoint(where, schema) : Promise.resolve(openLmdbEndpoint(where, log));
}

function positive(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer, got "${raw}"`);
  return n;
}

export async function runMigrateCommand(args: string[], stderr: NodeJS.WriteStream = process.stderr): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      from: { type: "string" },
      to: { type: "string" },
      schema: { type: "string" },
      batch: { type: "string" },
      "progress-every": { type: "string" },
    },
    strict: true,
  });
  if (!values.from || !values.to) throw new UsageError("migrate needs --from and --to (a data directory or a postgres:// URI)");
  if (isPostgres(values.from) === isPostgres(values.to)) {
    throw new UsageError(
      "migrate copies between an LMDB data directory and a PostgreSQL database: one of --from/--to must be a postgres:// URI, the other a directory",
    );
  }
  const batch = positive("batch", values.batch, 100);
  const every = positive("progress-every", values["progress-every"], 1000);
  const log = (line: string) => stderr.write(`[troupe] ${line}\n`);
  const from = await open(values.from, values.schema, log);
  let to: MigrationEndpoint | undefined;
  try {
    to = await open(values.to, values.schema, log);
    const bar = new ProgressBar(stderr, every);
    log(`migrate: ${from.label} -> ${to.label}`);
    const report = await copyDeployment(from, to, { batch, onProgress: (family: Family, done, total) => bar.update(family, done, total) });
    bar.end();
    if (report.resumed.length > 0) log(`migrate: resumed (already copied: ${report.resumed.join(", ")})`);
    log(
      `migrate: done: ${Object.entries(report.copied)
        .map(([f, n]) => `${n} ${f}`)
        .join(", ")}`,
    );
  } finally {
    await to?.close();
    await from.close();
  }
}
