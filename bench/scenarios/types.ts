// What a scenario receives and returns; the report turns ScenarioOutcome rows into the table
// and the JSON file.
import type { ErrorReport } from "../error-tally.ts";
import type { HttpClient } from "../http/types.ts";
import type { ResolvedOptions, ScenarioName } from "../options.ts";
import type { RssSampler } from "../proc-rss.ts";

export interface Metric {
  metric: string;
  value: number | string | boolean | null;
  unit: string;
}

export interface ScenarioOutcome {
  metrics: Metric[];
  errors: ErrorReport;
  /** Anything a reader must know to interpret the numbers (time-outs, server quirks seen). */
  notes: string[];
}

export interface ScenarioResult extends ScenarioOutcome {
  scenario: ScenarioName;
  description: string;
  wallSeconds: number;
}

export interface ScenarioContext {
  options: ResolvedOptions;
  /** Shared client for the main thread (`--client` kind, `--timeout` idle limit). */
  client: HttpClient;
  rss: RssSampler | null;
  progress(message: string): void;
}

export interface Scenario {
  name: ScenarioName;
  describe(options: ResolvedOptions): string;
  run(ctx: ScenarioContext): Promise<ScenarioOutcome>;
}
