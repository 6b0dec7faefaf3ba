// Small PostgreSQL chores for bench scripts (bench/ab-pair.sh with AB_DATABASE_URI):
//   node bench/pg-admin.mjs create ADMIN_URI NAME   → prints the new database's URI
//   node bench/pg-admin.mjs drop ADMIN_URI NAME
//   node bench/pg-admin.mjs backends ADMIN_URI NAME → pids of the server processes serving NAME
// (the server must run on this machine for the pids to mean anything: their CPU is read from /proc)
import pg from "pg";

const [verb, adminUri, name] = process.argv.slice(2);
if (!verb || !adminUri || !name || !/^[a-z_][a-z0-9_]*$/.test(name)) {
  console.error("usage: pg-admin.mjs create|drop|backends ADMIN_URI NAME (NAME: lower-case letters, digits, _)");
  process.exit(2);
}
const client = new pg.Client({ connectionString: adminUri });
await client.connect();
try {
  if (verb === "create") {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
    const uri = new URL(adminUri);
    uri.pathname = `/${name}`;
    console.log(uri.toString());
  } else if (verb === "drop") {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } else if (verb === "backends") {
    const r = await client.query("SELECT pid FROM pg_stat_activity WHERE datname = $1", [name]);
    console.log(r.rows.map((row) => row.pid).join(" "));
  } else throw new Error(`unknown verb ${verb}`);
} finally {
  await client.end();
}
