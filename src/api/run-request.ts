// Turns a RunCreate body plus request headers into the actor's CreateRunCommand: defaults
// (enqueue, values), checkpoint and header fields folded into config, webhook policy checks.
import { canonicalUuid } from "../util/ids.ts";
import { graphNotRegistered, noAssistantFor, TroupeError, validationError } from "../errors.ts";
import type { CreateRunCommand } from "../bridge/messages.ts";
import {
  anyOf,
  anyValue,
  arrayOf,
  body,
  bool,
  checkpointSelector,
  configSchema,
  enumOf,
  keyString,
  nullable,
  numeric,
  object,
  str,
  strings,
  uuid,
} from "../http/schemas/common.ts";
import type { Accepted, Schema } from "../http/schema-types.ts";
import type { AppContext } from "../server/context.ts";
import { DEFAULTS } from "../config/defaults.ts";
import type { ResolvedHeaderFilter } from "../config/types.ts";
import type { AuthInfo } from "../http/types.ts";
import { addAuthUserFields } from "../auth/run-access.ts";
import type { Json, JsonObject, RunRecord, RunnableConfigJson, StreamMode } from "../storage/records.ts";
import type { RunAssistant } from "../storage/port.ts";
import { validateWebhookUrl } from "../webhooks/url-policy.ts";

/** 10 years: a run's scheduled start must be a valid date (before: 500 "Invalid time value") */
const MAX_AFTER_SECONDS = 10 * 365 * 24 * 3600;

export const STREAM_MODES: StreamMode[] = ["values", "messages", "messages-tuple", "updates", "events", "tasks", "checkpoints", "debug", "custom", "tools"];
const streamMode = enumOf(STREAM_MODES);
const interruptNodes = nullable(anyOf(enumOf(["*"]), strings));
const gotoTarget = anyOf(str, body({ node: str, input: anyValue }, ["node"]));
/** a `[channel, value]` pair of a command's update */
const updatePair: Schema<Json[]> = { type: "array", minItems: 2, maxItems: 2 };
/** Typed as any JSON object: protocol and A2A runs build their commands as such. */
const runCommand: Schema<JsonObject> = body({
  resume: anyValue,
  update: nullable(anyOf(object, arrayOf(updatePair))),
  goto: nullable(anyOf(gotoTarget, arrayOf(gotoTarget))),
});

/** The RunCreate fields (reference §6); crons take theirs from here (src/api/crons.ts). */
export const runCreateFields = {
  assistant_id: keyString,
  input: anyValue,
  command: nullable(runCommand),
  checkpoint_id: nullable(uuid),
  checkpoint: nullable(checkpointSelector),
  config: nullable(configSchema),
  context: anyValue,
  metadata: nullable(object),
  webhook: nullable(str),
  interrupt_before: interruptNodes,
  interrupt_after: interruptNodes,
  multitask_strategy: nullable(enumOf(["reject", "interrupt", "rollback", "enqueue"])),
  stream_mode: nullable(anyOf(streamMode, arrayOf(streamMode))),
  stream_subgraphs: nullable(bool),
  stream_resumable: nullable(bool),
  on_disconnect: nullable(enumOf(["cancel", "continue"])),
  after_seconds: nullable(numeric({ minimum: 0, maximum: MAX_AFTER_SECONDS })),
  if_not_exists: nullable(enumOf(["reject", "create"])),
  on_completion: nullable(enumOf(["delete", "keep"])),
  feedback_keys: nullable(strings),
  langsmith_tracer: nullable(object),
  checkpoint_during: nullable(bool),
  durability: nullable(enumOf(["exit", "async", "sync"])),
};

export const runCreateSchema = body(runCreateFields, ["assistant_id"]);

/** A validated RunCreate body (also what MCP, A2A, protocol commands and cron ticks build). */
export type RunCreateBody = Accepted<typeof runCreateSchema>;

const patternCache = new Map<string, RegExp>();
const SECRET_HEADERS: readonly string[] = DEFAULTS.configurableHeaders.secrets;
/** Decisions per header name for one filter (names repeat; attacker-chosen ones are bounded by the clear). */
const copyDecisions = new WeakMap<ResolvedHeaderFilter, Map<string, boolean>>();

/**
 * Is a request header copied into the run's configurable? Matching `includes` and not `excludes`
 * (upstream's rule), and not a credential (SECRET_HEADERS) unless `includes` names it exactly.
 */
export function copiesHeader(filter: ResolvedHeaderFilter, name: string): boolean {
  let decided = copyDecisions.get(filter);
  if (!decided) copyDecisions.set(filter, (decided = new Map()));
  let copy = decided.get(name);
  if (copy === undefined) {
    copy =
      headerMatches(name, filter.includes) && !headerMatches(name, filter.excludes) && (!headerMatches(name, SECRET_HEADERS) || filter.includes.includes(name));
    if (decided.size >= 1024) decided.clear();
    decided.set(name, copy);
  }
  return copy;
}

function headerMatches(name: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => {
    if (!p.includes("*")) return p === name;
    let re = patternCache.get(p);
    if (!re)
      patternCache.set(
        p,
        (re = new RegExp(
          `^${p
            .split("*")
            .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
            .join(".*")}$`,
        )),
      );
    return re.test(name);
  });
}

/** The run's assistant; none → the JS server's text, which clients match on (`/No assistant found for/`). */
async function runAssistant(app: AppContext, assistantId: string, fresh: boolean): Promise<RunAssistant> {
  try {
    return await app.resolveRunAssistant(assistantId, fresh);
  } catch (err) {
    if (err instanceof TroupeError && err.code === "NOT_FOUND") throw noAssistantFor(assistantId);
    throw err;
  }
}

export async function buildCreateRun(
  app: AppContext,
  b: RunCreateBody,
  headers: Record<string, string>,
  opts: {
    threadId: string;
    runId: string;
    stateless: boolean;
    auth?: AuthInfo;
    /** false: nobody streams the run from its start (background, /wait): its events stay in the worker until a join */
    observed?: boolean;
    /** a request waits for the run's output (/wait, MCP): run.done carries it whatever its size */
    outputAwaited?: boolean;
    /** read the assistant now, not from a cache (the build after ASSISTANT_CHANGED: createWithAssistant) */
    freshAssistant?: boolean;
  },
): Promise<CreateRunCommand> {
  const { record: assistant, check: assistantCheck } = await runAssistant(app, b.assistant_id, opts.freshAssistant ?? false);
  const resumable = b.stream_resumable ?? false;
  if (!app.graphIds.has(assistant.graph_id)) throw graphNotRegistered(assistant.graph_id, assistant.assistant_id);
  if (b.webhook) {
    const reason = validateWebhookUrl(b.webhook, app.webhookPolicy);
    if (reason) throw validationError([{ loc: ["body", "webhook"], msg: reason, type: "value_error" }]);
  }
  const config: RunnableConfigJson = { ...(b.config ?? {}) };
  const configurable: JsonObject = { ...(config.configurable ?? {}) };
  if (b.checkpoint_id) configurable.checkpoint_id = canonicalUuid(b.checkpoint_id);
  if (b.checkpoint) Object.assign(configurable, b.checkpoint);
  if (b.langsmith_tracer?.project_name) configurable.langsmith_project = b.langsmith_tracer.project_name;
  if (b.langsmith_tracer?.example_id) configurable.langsmith_example_id = b.langsmith_tracer.example_id;
  const hf = app.config.http.configurableHeaders;
  for (const name in headers) if (copiesHeader(hf, name)) configurable[name] ??= headers[name];
  if (opts.auth) {
    // auth user fields (§6.3); user_id only when no run, thread or assistant config names one
    const threadCfg = opts.stateless ? undefined : (await app.storage.threads.get(opts.threadId))?.config.configurable;
    addAuthUserFields(configurable, opts.auth, threadCfg?.user_id != null || assistant.config.configurable?.user_id != null);
  }
  config.configurable = configurable;
  const modes = b.stream_mode == null ? ["values" as StreamMode] : Array.isArray(b.stream_mode) ? [...new Set(b.stream_mode)] : [b.stream_mode];
  return {
    type: "run.create",
    threadId: opts.threadId,
    runId: opts.runId,
    assistant,
    ...(assistantCheck === undefined ? {} : { assistantCheck }),
    kwargs: {
      ...(b.input !== undefined ? { input: b.input } : {}),
      ...(b.command ? { command: b.command } : {}),
      config,
      ...(b.context !== undefined && b.context !== null ? { context: b.context } : {}),
      stream_mode: modes,
      ...(b.interrupt_before ? { interrupt_before: b.interrupt_before } : {}),
      ...(b.interrupt_after ? { interrupt_after: b.interrupt_after } : {}),
      ...(b.webhook ? { webhook: b.webhook } : {}),
      ...(b.feedback_keys ? { feedback_keys: b.feedback_keys } : {}),
      temporary: opts.stateless && (b.on_completion ?? "delete") === "delete",
      subgraphs: b.stream_subgraphs ?? false,
      resumable,
      ...(b.durability ? { durability: b.durability } : {}),
    },
    metadata: b.metadata ?? {},
    multitaskStrategy: b.multitask_strategy ?? "enqueue",
    ifNotExists: b.if_not_exists ?? "reject",
    afterSeconds: b.after_seconds ?? 0,
    stateless: opts.stateless,
    onCompletion: b.on_completion ?? "delete",
    // a resumable run's log must be complete, and a thread stream listener reads every run live
    observed: (opts.observed ?? true) || resumable || app.pool.threadStreams.has(opts.threadId),
    outputAwaited: opts.outputAwaited ?? false,
  };
}

/**
 * A run's create whose assistant may have come from a cache (buildCreateRun): `created` is its
 * create, sent; refused because the assistant changed or went since the cache read it
 * (ASSISTANT_CHANGED, on PostgreSQL: written through another node), nothing of it was written or
 * sent, and it is built again from a fresh read (`rebuild`: buildCreateRun with freshAssistant,
 * and whatever the caller checks of it) and created once more; a deleted assistant then fails the
 * build with the usual 404.
 */
export function createWithAssistant(
  cmd: CreateRunCommand,
  created: Promise<RunRecord>,
  rebuild: () => Promise<CreateRunCommand>,
  create: (cmd: CreateRunCommand) => Promise<RunRecord>,
): Promise<RunRecord> {
  if (cmd.assistantCheck === undefined) return created;
  return created.catch(async (err: unknown) => {
    if (!(err instanceof TroupeError && err.code === "ASSISTANT_CHANGED")) throw err;
    return create(await rebuild());
  });
}

/** Builds a run's command (`build`: buildCreateRun with the given freshAssistant, and the caller's checks) and creates it (createWithAssistant). */
export async function createBuiltRun(app: AppContext, build: (freshAssistant: boolean) => Promise<CreateRunCommand>): Promise<RunRecord> {
  const cmd = await build(false);
  return createWithAssistant(
    cmd,
    app.pool.createRun(cmd),
    () => build(true),
    (c) => app.pool.createRun(c),
  );
}
