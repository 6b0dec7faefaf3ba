// troupe-bench entry point: parse options, check the server answers, run the chosen scenarios
// one after another, print the table and write the JSON file. See bench/README.md.
import { performance } from "node:perf_hooks";
import { ErrorTally } from "./error-tally.ts";
import { createClient } from "./http/create-client.ts";
import type { HttpClient } from "./http/types.ts";
import { HELP, OptionError, parseOptions, type ResolvedOptions } from "./options.ts";
import { RssSampler } from "./proc-rss.ts";
import { buildJson, formatNotes, formatTable, writeJson } from "./report.ts";
import { SCENARIOS } from "./scenarios/index.ts";
import type { ScenarioContext, ScenarioResult } from "./scenarios/types.ts";

const SETTLE_MS = 300;

function progress(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** GET /ok must answer 2xx before any load is sent; GET /info is recorded when available. */
async function preflight(client: HttpClient): Promise<{ ok: boolean; detail: string; info: unknown }> {
  try {
    const res = await client.request(client.prepare("GET", "/ok"));
    if (res.status < 200 || res.status >= 300) return { ok: false, detail: `GET /ok answered ${res.status}`, info: null };
  } catch (err) {
    return { ok: false, detail: `GET /ok failed: ${(err as Error).message}`, info: null };
  }
  let info: unknown = null;
  try {
    const res = await client.request(client.prepare("GET", "/info"));
    if (res.status >= 200 && res.status < 300) info = JSON.parse(res.body.toString("utf8"));
  } catch {
    info = null;
  }
  return { ok: true, detail: "", info };
}

async function runAll(options: ResolvedOptions): Promise<number> {
  const startedAt = new Date();
  // every server must answer before any load starts; /info is the first one's
  let pre: { ok: boolean; detail: string; info: unknown } = { ok: false, detail: "", info: null };
  for (const [i, url] of options.urls.entries()) {
    const one = createClient(options.client, { baseUrl: url, idleTimeoutMs: options.idleTimeoutMs });
    const check = await preflight(one);
    one.close();
    if (!check.ok) {
      progress(`troupe-bench: server at ${url.href} is not usable: ${check.detail}`);
      return 2;
    }
    if (i === 0) pre = check;
  }
  const client = createClient(options.client, { baseUrl: options.url, idleTimeoutMs: options.idleTimeoutMs }, options.urls);
  const rss = options.pid !== null && options.scenarios.includes("rss") ? new RssSampler(options.pid, options.pidTree) : null;
  const ctx: ScenarioContext = { options, client, rss, progress };
  const results: ScenarioResult[] = [];
  progress(
    `troupe-bench → ${options.urls.map((u) => u.href).join(", ")} (client ${options.client}, ${options.clientWorkers} client worker(s), node ${process.version})`,
  );
  for (const name of options.scenarios) {
    const scenario = SCENARIOS[name];
    const description = scenario.describe(options);
    progress(`▶ ${name}: ${description}`);
    const t0 = performance.now();
    let outcome;
    try {
      outcome = await scenario.run(ctx);
    } catch (err) {
      const errors = new ErrorTally();
      errors.add("bench failure", err instanceof Error ? (err.stack ?? err.message) : String(err));
      outcome = { metrics: [], errors: errors.report(), notes: ["the scenario itself threw; see errors"] };
    }
    const wallSeconds = (performance.now() - t0) / 1000;
    results.push({ scenario: name, description, wallSeconds, ...outcome });
    progress(`  done in ${wallSeconds.toFixed(1)} s, ${outcome.errors.count} error(s)`);
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  }
  rss?.stop();
  client.close();

  process.stdout.write(`\n${formatTable(results)}\n`);
  const notes = formatNotes(results);
  if (notes !== "") process.stdout.write(`\n${notes}\n`);
  writeJson(options.outFile, buildJson(options, { startedAt, finishedAt: new Date(), serverInfo: pre.info }, results));
  progress(`\nresults written to ${options.outFile}`);
  return 0;
}

async function main(argv: string[]): Promise<number> {
  let options: ResolvedOptions | null;
  try {
    options = parseOptions(argv);
  } catch (err) {
    if (err instanceof OptionError) {
      progress(`troupe-bench: ${err.message}\n(see --help)`);
      return 2;
    }
    throw err;
  }
  if (options === null) {
    process.stdout.write(HELP);
    return 0;
  }
  return runAll(options);
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    progress(`troupe-bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
