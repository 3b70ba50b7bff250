/**
 * The Inspect AI eval log, as TypeScript types (what we write) and zod schemas (what we read).
 *
 * Glossary
 * - log: one `.eval` file, a zip holding one run of one task against one model. Its header
 *   (`EvalLog` without samples) says what ran (`eval`: an `EvalSpec`), how (`plan`), how it ended
 *   (`status`, `error`), what it scored (`results`) and what it cost (`stats`).
 * - sample: one dataset item run once (`EvalSample`): its input, the conversation (`messages`),
 *   the final model `output`, its `scores`, and the `events` that happened while it ran.
 * - epoch: the repetition number of a sample (1-based). A sample is identified by `(id, epoch)`.
 * - event: one timestamped step inside a sample (a model call, a tool call, a sandbox command, a
 *   score...), tagged by its `event` field. Events nest through `span_begin`/`span_end`.
 * - summary: the small form of a finished sample (`EvalSampleSummary`: ids, scores, usage, error
 *   message, counts) that the viewer lists without opening every sample.
 *
 * Field names and defaults mirror the pydantic models of `inspect_ai` (`log/_log.py`, `event/`,
 * `model/_chat_message.py`, `model/_model_output.py`). The types mark as required every field
 * Python always writes, because `inspect view` assumes them. The schemas are lenient: unknown keys
 * pass through, and fields Python fills with a default get that default when absent, so a parsed
 * log has the shape of these types.
 */
import { z } from 'zod';

/** `LOG_SCHEMA_VERSION` in inspect_ai. */
export const LOG_SCHEMA_VERSION = 2;

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** Allowed transitions: started -> success | cancelled | error. A log without a header reads as started. */
export type EvalStatus = 'started' | 'success' | 'cancelled' | 'error';

// ---------------------------------------------------------------------------------------------
// Usage, errors, scores

export interface ModelUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  input_tokens_cache_write?: number;
  input_tokens_cache_read?: number;
  reasoning_tokens?: number;
  /** Dollars. */
  total_cost?: number;
}

export interface EvalError {
  message: string;
  traceback: string;
  traceback_ansi: string;
}

/** `C` correct, `I` incorrect, `P` partial, `N` no answer (Inspect's constants). */
export type ScoreValue =
  | string
  | number
  | boolean
  | Array<string | number | boolean>
  | { [key: string]: string | number | boolean | null };

export interface Score {
  value: ScoreValue;
  answer?: string;
  explanation?: string;
  metadata?: Record<string, unknown>;
  /** Edits made after scoring; Python always writes it (empty when never edited). */
  history: unknown[];
}

// ---------------------------------------------------------------------------------------------
// Messages

export interface ContentText {
  type: 'text';
  text: string;
  refusal?: boolean;
  citations?: unknown[];
  internal?: JsonValue;
}

export interface ContentReasoning {
  type: 'reasoning';
  reasoning: string;
  summary?: string;
  signature?: string;
  redacted: boolean;
  internal?: JsonValue;
}

export interface ContentImage {
  type: 'image';
  /** URL or data URI. */
  image: string;
  detail: 'auto' | 'low' | 'high' | 'original';
  internal?: JsonValue;
}

/** Content kinds ct does not produce (audio, video, document, data, tool_use), kept as read. */
export interface ContentOther {
  type: 'audio' | 'video' | 'document' | 'data' | 'tool_use';
  [key: string]: unknown;
}

export type Content = ContentText | ContentReasoning | ContentImage | ContentOther;

export interface ToolCallContent {
  title?: string;
  format: 'text' | 'markdown';
  content: string;
}

export interface ToolCall {
  id: string;
  function: string;
  arguments: Record<string, unknown>;
  type: 'function' | 'custom';
  parse_error?: string;
  view?: ToolCallContent;
}

export type ToolCallErrorType =
  | 'parsing'
  | 'timeout'
  | 'unicode_decode'
  | 'permission'
  | 'file_not_found'
  | 'is_a_directory'
  | 'limit'
  | 'approval'
  | 'cancelled'
  | 'sandbox_unavailable'
  | 'unknown'
  | 'output_limit';

export interface ToolCallError {
  type: ToolCallErrorType;
  message: string;
}

interface ChatMessageBase {
  /** Python generates one for every new message; absent only in old logs. */
  id?: string;
  content: string | Content[];
  source?: 'input' | 'generate' | 'operator';
  metadata?: Record<string, unknown>;
}

export interface ChatMessageSystem extends ChatMessageBase {
  role: 'system';
}

export interface ChatMessageUser extends ChatMessageBase {
  role: 'user';
  tool_call_id?: string[];
}

export interface ChatMessageAssistant extends ChatMessageBase {
  role: 'assistant';
  tool_calls?: ToolCall[];
  model?: string;
}

export interface ChatMessageTool extends ChatMessageBase {
  role: 'tool';
  tool_call_id?: string;
  function?: string;
  error?: ToolCallError;
}

export type ChatMessage = ChatMessageSystem | ChatMessageUser | ChatMessageAssistant | ChatMessageTool;

// ---------------------------------------------------------------------------------------------
// Model output and tools

export type StopReason = 'stop' | 'max_tokens' | 'model_length' | 'tool_calls' | 'content_filter' | 'unknown';

export interface ChatCompletionChoice {
  message: ChatMessageAssistant;
  stop_reason: StopReason;
  stop_details?: Record<string, unknown>;
  logprobs?: unknown;
}

export interface ModelOutput {
  model: string;
  choices: ChatCompletionChoice[];
  /** Text of the first choice (Python derives it when empty). */
  completion: string;
  usage?: ModelUsage;
  /** Seconds the generate call took. */
  time?: number;
  metadata?: Record<string, unknown>;
  error?: string;
  response_id?: string;
}

export interface ToolParams {
  type: 'object';
  properties: Record<string, unknown>;
  required: string[];
  additionalProperties?: boolean;
}

export interface ToolInfo {
  name: string;
  description: string;
  parameters: ToolParams;
  options?: Record<string, unknown>;
}

export type ToolChoice = 'auto' | 'any' | 'none' | { name: string };

/** Generation settings; every key optional (`{}` is valid). */
export interface GenerateConfig {
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  seed?: number;
  stop_seqs?: string[];
  max_retries?: number;
  timeout?: number;
  max_connections?: number;
  system_message?: string;
  reasoning_effort?: string;
  reasoning_tokens?: number;
  [key: string]: unknown;
}

/** Raw provider request/response of one model call. */
export interface ModelCall {
  request: Record<string, unknown>;
  response?: Record<string, unknown>;
  time?: number;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Events

interface BaseEvent {
  /** Python generates one for every new event. */
  uuid?: string;
  /** Id of the span (see span_begin) the event happened in. */
  span_id?: string;
  /** ISO 8601 with offset. */
  timestamp: string;
  /** Seconds of working time into the sample when the event happened. */
  working_start: number;
  metadata?: Record<string, unknown>;
  pending?: boolean;
}

/** The dataset item as given to the sample (`Sample` in inspect_ai). */
export interface SampleInit {
  input: string | ChatMessage[];
  target: string | string[];
  id?: string | number;
  choices?: string[];
  metadata?: Record<string, unknown>;
  sandbox?: SandboxEnvironmentSpec;
  files?: Record<string, string>;
  setup?: string;
}

export interface SampleInitEvent extends BaseEvent {
  event: 'sample_init';
  sample: SampleInit;
  state?: JsonValue;
}

export interface SandboxEvent extends BaseEvent {
  event: 'sandbox';
  action: 'exec' | 'read_file' | 'write_file';
  cmd?: string;
  options?: Record<string, JsonValue>;
  file?: string;
  input?: string;
  /** Exit code of an exec. */
  result?: number;
  output?: string;
  completed?: string;
}

export interface ModelEvent extends BaseEvent {
  event: 'model';
  model: string;
  role?: string;
  input: ChatMessage[];
  tools: ToolInfo[];
  tool_choice: ToolChoice;
  config: GenerateConfig;
  output: ModelOutput;
  retries?: number;
  error?: string;
  traceback?: string;
  traceback_ansi?: string;
  cache?: 'read' | 'write';
  call?: ModelCall;
  completed?: string;
  working_time?: number;
}

export type ToolResult = string | number | boolean | Content | Content[];

export interface ToolEvent extends BaseEvent {
  event: 'tool';
  type: 'function';
  id: string;
  function: string;
  arguments: Record<string, unknown>;
  view?: ToolCallContent;
  result: ToolResult;
  /** [original size, truncated size] in bytes when the output was cut. */
  truncated?: [number, number];
  error?: ToolCallError;
  /** Deprecated in Inspect (events are recorded in the main transcript) but always written. */
  events: unknown[];
  completed?: string;
  working_time?: number;
  agent?: string;
  failed?: boolean;
  message_id?: string;
}

export interface ScoreEvent extends BaseEvent {
  event: 'score';
  score: Score;
  target?: string | string[];
  intermediate: boolean;
  scorer?: string;
  scorer_args?: Record<string, unknown>;
  model_usage?: Record<string, ModelUsage>;
}

export interface ErrorEvent extends BaseEvent {
  event: 'error';
  error: EvalError;
}

export interface InfoEvent extends BaseEvent {
  event: 'info';
  source?: string;
  data: JsonValue;
}

export type LoggingLevel = 'debug' | 'trace' | 'http' | 'sandbox' | 'info' | 'warning' | 'error' | 'critical';

export interface LoggingMessage {
  name?: string;
  level: LoggingLevel;
  message: string;
  /** Milliseconds since the epoch. */
  created: number;
  filename: string;
  module: string;
  lineno: number;
}

export interface LoggerEvent extends BaseEvent {
  event: 'logger';
  message: LoggingMessage;
}

/** One JSON Patch operation. */
export interface JsonChange {
  op: 'remove' | 'add' | 'replace' | 'move' | 'test' | 'copy';
  path: string;
  from?: string;
  value: JsonValue;
  replaced: JsonValue;
}

export interface StateEvent extends BaseEvent {
  event: 'state';
  changes: JsonChange[];
}

export type SampleLimitType = 'message' | 'time' | 'working' | 'token' | 'turn' | 'cost' | 'operator' | 'custom';

export interface SampleLimitEvent extends BaseEvent {
  event: 'sample_limit';
  type: SampleLimitType;
  message: string;
  limit?: number;
}

export interface SpanBeginEvent extends BaseEvent {
  event: 'span_begin';
  id: string;
  parent_id?: string;
  type?: string;
  name: string;
}

export interface SpanEndEvent extends BaseEvent {
  event: 'span_end';
  id: string;
}

/** Event kinds Inspect writes that ct does not produce; read and kept as they are. */
export const OTHER_EVENT_TYPES = [
  'store',
  'anchor',
  'approval',
  'review',
  'sentinel',
  'branch',
  'checkpoint',
  'compaction',
  'input',
  'interrupt',
  'score_edit',
  'step',
  'subtask',
] as const;

export interface OtherEvent extends BaseEvent {
  event: (typeof OTHER_EVENT_TYPES)[number];
  [key: string]: unknown;
}

export type Event =
  | SampleInitEvent
  | SandboxEvent
  | ModelEvent
  | ToolEvent
  | ScoreEvent
  | ErrorEvent
  | InfoEvent
  | LoggerEvent
  | StateEvent
  | SampleLimitEvent
  | SpanBeginEvent
  | SpanEndEvent
  | OtherEvent;

// ---------------------------------------------------------------------------------------------
// Samples

export interface SandboxEnvironmentSpec {
  /** Provider name, e.g. `docker`. */
  type: string;
  /** Provider config, e.g. the compose file path. */
  config?: unknown;
}

export interface EvalSampleLimit {
  type: SampleLimitType | 'context';
  limit: number;
  reason?: string;
}

export interface EvalSample {
  id: string | number;
  epoch: number;
  input: string | ChatMessage[];
  choices?: string[];
  target: string | string[];
  sandbox?: SandboxEnvironmentSpec;
  files?: string[];
  setup?: string;
  messages: ChatMessage[];
  output: ModelOutput;
  scores?: Record<string, Score>;
  metadata: Record<string, unknown>;
  store: Record<string, unknown>;
  events: Event[];
  /** Keyed by model name. */
  model_usage: Record<string, ModelUsage>;
  /** Keyed by model role. */
  role_usage: Record<string, ModelUsage>;
  started_at?: string;
  completed_at?: string;
  /** Seconds. */
  total_time?: number;
  /** Seconds. */
  working_time?: number;
  uuid?: string;
  error?: EvalError;
  error_retries?: EvalError[];
  /** Content referenced as `attachment://<hash>` from messages and events. */
  attachments: Record<string, string>;
  limit?: EvalSampleLimit;
}

export interface EvalSampleSummary {
  id: string | number;
  epoch: number;
  input: string | ChatMessage[];
  choices?: string[];
  target: string | string[];
  metadata: Record<string, unknown>;
  scores?: Record<string, Score>;
  model_usage: Record<string, ModelUsage>;
  role_usage: Record<string, ModelUsage>;
  started_at?: string;
  completed_at?: string;
  total_time?: number;
  working_time?: number;
  uuid?: string;
  /** The sample's error message. */
  error?: string;
  /** The type of the limit that stopped the sample. */
  limit?: string;
  limit_reason?: string;
  retries?: number;
  completed: boolean;
  message_count?: number;
}

// ---------------------------------------------------------------------------------------------
// Header

export interface EvalDataset {
  name?: string;
  location?: string;
  samples?: number;
  sample_ids?: Array<string | number>;
  shuffled?: boolean;
}

export interface EvalConfig {
  limit?: number | [number, number];
  sample_id?: string | number | Array<string | number>;
  epochs?: number;
  epochs_reducer?: string[];
  /** true: fail on the first error; false: never; 0..1: a proportion; >1: a count. */
  fail_on_error?: boolean | number;
  continue_on_fail?: boolean;
  retry_on_error?: number;
  score_on_error?: boolean;
  message_limit?: number;
  token_limit?: number;
  time_limit?: number;
  working_limit?: number;
  max_samples?: number;
  max_tasks?: number;
  max_subprocesses?: number;
  max_sandboxes?: number;
  sandbox_cleanup?: boolean;
  sandbox_prebuilt?: boolean;
  log_samples?: boolean;
  log_realtime?: boolean;
  log_images?: boolean;
  log_buffer?: number;
  score_display?: boolean;
  [key: string]: unknown;
}

/** The config values Inspect always writes (`eval_config_defaults()`), to spread under ours. */
export const EVAL_CONFIG_DEFAULTS = {
  epochs: 1,
  fail_on_error: true,
  continue_on_fail: false,
  score_on_error: false,
  sandbox_cleanup: true,
  sandbox_prebuilt: false,
  log_samples: true,
  log_realtime: true,
  log_images: true,
  score_display: true,
} as const satisfies EvalConfig;

export interface EvalRevision {
  type: 'git';
  origin: string;
  commit: string;
  dirty?: boolean;
}

export interface EvalMetricDefinition {
  name: string;
  options?: Record<string, unknown>;
}

export interface EvalScorer {
  name: string;
  options?: Record<string, unknown>;
  metrics?: Array<EvalMetricDefinition | Record<string, EvalMetricDefinition[]>> | Record<string, EvalMetricDefinition[]>;
  metadata?: Record<string, unknown>;
}

export interface EvalSpec {
  eval_set_id?: string;
  eval_id: string;
  run_id: string;
  /** ISO 8601 with offset. */
  created: string;
  task: string;
  task_id: string;
  task_version: number | string;
  task_file?: string;
  task_display_name?: string;
  task_registry_name?: string;
  task_attribs: Record<string, unknown>;
  task_args: Record<string, unknown>;
  task_args_passed: Record<string, unknown>;
  solver?: string;
  solver_args?: Record<string, unknown>;
  tags?: string[];
  dataset: EvalDataset;
  sandbox?: SandboxEnvironmentSpec;
  model: string;
  model_generate_config: GenerateConfig;
  model_base_url?: string;
  model_args: Record<string, unknown>;
  model_roles?: Record<string, unknown>;
  config: EvalConfig;
  revision?: EvalRevision;
  /** Package name -> version. */
  packages: Record<string, string>;
  metadata?: Record<string, unknown>;
  scorers?: EvalScorer[];
  metrics?: unknown;
}

export interface EvalPlanStep {
  solver: string;
  params: Record<string, unknown>;
  params_passed: Record<string, unknown>;
}

export interface EvalPlan {
  name: string;
  steps: EvalPlanStep[];
  finish?: EvalPlanStep;
  config: GenerateConfig;
}

export interface EvalMetric {
  name: string;
  value: number;
  params: Record<string, unknown>;
  group?: string;
  metadata?: Record<string, unknown>;
}

export interface EvalScore {
  /** The score's name: the scorer's name, or the key of a dict-valued score. */
  name: string;
  scorer: string;
  reducer?: string;
  scored_samples?: number;
  unscored_samples?: number;
  params: Record<string, unknown>;
  /** Keyed by metric name. */
  metrics: Record<string, EvalMetric>;
  metadata?: Record<string, unknown>;
}

/** Which score and metric best summarise the eval. */
export interface HeadlineMetric {
  scorer?: string;
  score?: string;
  metric?: string;
  reducer?: string;
}

export interface EvalResults {
  /** Samples planned: dataset samples x epochs. */
  total_samples: number;
  /** Samples that finished without error. */
  completed_samples: number;
  scores: EvalScore[];
  headline?: HeadlineMetric;
  metadata?: Record<string, unknown>;
}

export interface EvalSampleScore extends Score {
  sample_id?: string | number;
}

/** Per-sample scores reduced across epochs. */
export interface EvalSampleReductions {
  scorer: string;
  reducer?: string;
  samples: EvalSampleScore[];
}

export interface EvalStats {
  /** ISO 8601 with offset; empty when the run never started. */
  started_at: string;
  /** ISO 8601 with offset; empty while running or when interrupted. */
  completed_at: string;
  model_usage: Record<string, ModelUsage>;
  role_usage: Record<string, ModelUsage>;
  connection_limit_history: unknown[];
}

export interface EvalLog {
  version: number;
  status: EvalStatus;
  eval: EvalSpec;
  plan: EvalPlan;
  results?: EvalResults;
  stats: EvalStats;
  error?: EvalError;
  invalidated: boolean;
  /** `eval.tags`, sorted (edits made later through Inspect are applied on top). */
  tags: string[];
  /** `eval.metadata` (edits made later through Inspect are applied on top). */
  metadata: Record<string, unknown>;
  samples?: EvalSample[];
  reductions?: EvalSampleReductions[];
}

/** `_journal/start.json`. */
export interface LogStart {
  version: number;
  eval: EvalSpec;
  plan: EvalPlan;
}

// ---------------------------------------------------------------------------------------------
// Schemas for reading. Lenient: unknown keys pass through; Python's defaults fill absent fields.

/** Any JSON number, NaN and infinities included (zod's `z.number()` rejects them; Inspect writes them). */
const num = () => z.custom<number>((v) => typeof v === 'number', { message: 'expected a number' });
const record = () => z.record(z.string(), z.unknown());
const emptyRecord = () => record().default(() => ({}));
const anyJson = z.custom<JsonValue>(() => true);

export const ModelUsageSchema = z.looseObject({
  input_tokens: num().default(0),
  output_tokens: num().default(0),
  total_tokens: num().default(0),
  input_tokens_cache_write: num().optional(),
  input_tokens_cache_read: num().optional(),
  reasoning_tokens: num().optional(),
  total_cost: num().optional(),
});
const usageRecord = () => z.record(z.string(), ModelUsageSchema).default(() => ({}));

export const EvalErrorSchema = z.looseObject({
  message: z.string(),
  traceback: z.string(),
  traceback_ansi: z.string(),
});

const scalar = z.union([z.string(), num(), z.boolean()]);
export const ScoreValueSchema = z.union([
  scalar,
  z.array(scalar),
  z.record(z.string(), z.union([scalar, z.null()])),
]);

export const ScoreSchema = z.looseObject({
  value: ScoreValueSchema,
  answer: z.string().optional(),
  explanation: z.string().optional(),
  metadata: record().optional(),
  history: z.array(z.unknown()).default(() => []),
});

export const ContentSchema = z.union([
  z.looseObject({ type: z.literal('text'), text: z.string() }),
  z.looseObject({ type: z.literal('reasoning'), reasoning: z.string(), redacted: z.boolean().default(false) }),
  z.looseObject({
    type: z.literal('image'),
    image: z.string(),
    detail: z.enum(['auto', 'low', 'high', 'original']).default('auto'),
  }),
  z.looseObject({ type: z.enum(['audio', 'video', 'document', 'data', 'tool_use']) }),
]);

const ToolCallContentSchema = z.looseObject({
  title: z.string().optional(),
  format: z.enum(['text', 'markdown']),
  content: z.string().default(''),
});

export const ToolCallSchema = z.looseObject({
  id: z.string(),
  function: z.string(),
  arguments: record(),
  type: z.enum(['function', 'custom']).nullish().transform((t) => t ?? 'function'),
  parse_error: z.string().optional(),
  view: ToolCallContentSchema.optional(),
});

export const ToolCallErrorSchema = z.looseObject({
  type: z.enum([
    'parsing',
    'timeout',
    'unicode_decode',
    'permission',
    'file_not_found',
    'is_a_directory',
    'limit',
    'approval',
    'cancelled',
    'sandbox_unavailable',
    'unknown',
    'output_limit',
  ]),
  message: z.string(),
});

const messageBase = {
  id: z.string().optional(),
  content: z.union([z.string(), z.array(ContentSchema)]),
  source: z.enum(['input', 'generate', 'operator']).optional(),
  metadata: record().optional(),
};

export const ChatMessageAssistantSchema = z.looseObject({
  ...messageBase,
  role: z.literal('assistant'),
  tool_calls: z.array(ToolCallSchema).optional(),
  model: z.string().optional(),
});

export const ChatMessageSchema = z.discriminatedUnion('role', [
  z.looseObject({ ...messageBase, role: z.literal('system') }),
  z.looseObject({ ...messageBase, role: z.literal('user'), tool_call_id: z.array(z.string()).optional() }),
  ChatMessageAssistantSchema,
  z.looseObject({
    ...messageBase,
    role: z.literal('tool'),
    tool_call_id: z.string().optional(),
    function: z.string().optional(),
    error: ToolCallErrorSchema.optional(),
  }),
]);

const stopReasons = ['stop', 'max_tokens', 'model_length', 'tool_calls', 'content_filter', 'unknown'] as const;

export const ModelOutputSchema = z.looseObject({
  model: z.string().default(''),
  choices: z
    .array(
      z.looseObject({
        message: ChatMessageAssistantSchema,
        stop_reason: z.enum(stopReasons).default('unknown'),
        stop_details: record().optional(),
        logprobs: z.unknown().optional(),
      }),
    )
    .default(() => []),
  completion: z.string().default(''),
  usage: ModelUsageSchema.optional(),
  time: num().optional(),
  metadata: record().optional(),
  error: z.string().optional(),
  response_id: z.string().optional(),
});

const emptyOutput = (): z.output<typeof ModelOutputSchema> => ({ model: '', choices: [], completion: '' });

const ToolInfoSchema = z.looseObject({
  name: z.string(),
  description: z.string(),
  parameters: z
    .looseObject({
      type: z.literal('object').default('object'),
      properties: emptyRecord(),
      required: z.array(z.string()).default(() => []),
      additionalProperties: z.boolean().optional(),
    })
    .default(() => ({ type: 'object' as const, properties: {}, required: [] })),
  options: record().optional(),
});

const ToolChoiceSchema = z.union([z.enum(['auto', 'any', 'none']), z.looseObject({ name: z.string() })]);

export const SandboxEnvironmentSpecSchema = z.preprocess(
  // Older logs write the spec as a [type, config] pair.
  (v) => (Array.isArray(v) ? { type: v[0], config: v[1] } : v),
  z.looseObject({ type: z.string(), config: z.unknown().optional() }),
);

const baseEvent = {
  uuid: z.string().optional(),
  span_id: z.string().optional(),
  timestamp: z.string(),
  working_start: num().default(0),
  metadata: record().optional(),
  pending: z.boolean().optional(),
};

const JsonChangeSchema = z.looseObject({
  op: z.enum(['remove', 'add', 'replace', 'move', 'test', 'copy']),
  path: z.string(),
  from: z.string().optional(),
  value: anyJson.default(null),
  replaced: anyJson.default(null),
});

const LoggingMessageSchema = z.looseObject({
  name: z.string().optional(),
  level: z
    .enum(['debug', 'trace', 'http', 'sandbox', 'info', 'warning', 'error', 'critical', 'tools'])
    .transform((l) => (l === 'tools' ? 'trace' : l)),
  message: z.string(),
  created: num(),
  filename: z.string().default('unknown'),
  module: z.string().default('unknown'),
  lineno: num().default(0),
});

const sampleLimitTypes = ['message', 'time', 'working', 'token', 'turn', 'cost', 'operator', 'custom'] as const;

const knownEventSchemas = [
  z.looseObject({
    ...baseEvent,
    event: z.literal('sample_init'),
    sample: z.looseObject({
      input: z.union([z.string(), z.array(ChatMessageSchema)]),
      target: z.union([z.string(), z.array(z.string())]).default(''),
      id: z.union([z.string(), num()]).optional(),
      choices: z.array(z.string()).optional(),
      metadata: record().optional(),
      sandbox: SandboxEnvironmentSpecSchema.optional(),
      files: z.record(z.string(), z.string()).optional(),
      setup: z.string().optional(),
    }),
    state: anyJson.optional(),
  }),
  z.looseObject({
    ...baseEvent,
    event: z.literal('sandbox'),
    action: z.enum(['exec', 'read_file', 'write_file']),
    cmd: z.string().optional(),
    options: z.record(z.string(), anyJson).optional(),
    file: z.string().optional(),
    input: z.string().optional(),
    result: num().optional(),
    output: z.string().optional(),
    completed: z.string().optional(),
  }),
  z.looseObject({
    ...baseEvent,
    event: z.literal('model'),
    model: z.string(),
    role: z.string().optional(),
    input: z.array(ChatMessageSchema),
    tools: z.array(ToolInfoSchema),
    tool_choice: ToolChoiceSchema,
    config: z.looseObject({}),
    output: ModelOutputSchema,
    retries: num().optional(),
    error: z.string().optional(),
    traceback: z.string().optional(),
    traceback_ansi: z.string().optional(),
    cache: z.enum(['read', 'write']).optional(),
    call: z.looseObject({ request: record(), response: record().optional(), time: num().optional() }).optional(),
    completed: z.string().optional(),
    working_time: num().optional(),
  }),
  z.looseObject({
    ...baseEvent,
    event: z.literal('tool'),
    type: z.literal('function').default('function'),
    id: z.string(),
    function: z.string(),
    arguments: record(),
    view: ToolCallContentSchema.optional(),
    result: z
      .union([scalar, ContentSchema, z.array(ContentSchema)])
      .default(''),
    truncated: z.tuple([num(), num()]).optional(),
    error: ToolCallErrorSchema.optional(),
    events: z.array(z.unknown()).default(() => []),
    completed: z.string().optional(),
    working_time: num().optional(),
    agent: z.string().optional(),
    failed: z.boolean().optional(),
    message_id: z.string().optional(),
  }),
  z.looseObject({
    ...baseEvent,
    event: z.literal('score'),
    // Old logs can carry a null value for an intermediate score that failed; Inspect reads it as NaN.
    score: z.preprocess(
      (s) => (s && typeof s === 'object' && (s as { value?: unknown }).value == null ? { ...s, value: NaN } : s),
      ScoreSchema,
    ),
    target: z.union([z.string(), z.array(z.string())]).optional(),
    intermediate: z.boolean().default(false),
    scorer: z.string().optional(),
    scorer_args: record().optional(),
    model_usage: z.record(z.string(), ModelUsageSchema).optional(),
  }),
  z.looseObject({ ...baseEvent, event: z.literal('error'), error: EvalErrorSchema }),
  z.looseObject({ ...baseEvent, event: z.literal('info'), source: z.string().optional(), data: anyJson.default(null) }),
  z.looseObject({ ...baseEvent, event: z.literal('logger'), message: LoggingMessageSchema }),
  z.looseObject({ ...baseEvent, event: z.literal('state'), changes: z.array(JsonChangeSchema) }),
  z.looseObject({
    ...baseEvent,
    event: z.literal('sample_limit'),
    type: z.enum(sampleLimitTypes),
    message: z.string(),
    limit: num().optional(),
  }),
  z.looseObject({
    ...baseEvent,
    event: z.literal('span_begin'),
    id: z.string(),
    parent_id: z.string().optional(),
    type: z.string().optional(),
    name: z.string(),
  }),
  z.looseObject({ ...baseEvent, event: z.literal('span_end'), id: z.string() }),
  z.looseObject({ ...baseEvent, event: z.enum(OTHER_EVENT_TYPES) }),
] as const;

const KnownEventSchema = z.discriminatedUnion('event', knownEventSchemas);

const knownEventTypes = new Set<string>(
  knownEventSchemas.flatMap((s) => {
    const tag = s.shape.event;
    return tag instanceof z.ZodLiteral ? [...tag.values].map(String) : (tag as z.ZodEnum).options.map(String);
  }),
);

/**
 * An event. Events of kinds newer than this module are kept as read (typed as `OtherEvent`) so a
 * log from a newer Inspect still opens.
 */
export const EventSchema = z
  .union([
    KnownEventSchema,
    z
      .looseObject({ ...baseEvent, event: z.string() })
      .refine((e) => !knownEventTypes.has(e.event), { message: 'invalid event' }),
  ])
  .transform((e) => e as Event);

const sampleIdSchema = z.union([z.string(), num()]);
const inputSchema = z.union([z.string(), z.array(ChatMessageSchema)]);
const targetSchema = z.union([z.string(), z.array(z.string())]);

const EvalSampleLimitSchema = z.looseObject({
  type: z.enum([...sampleLimitTypes, 'context']),
  limit: num(),
  reason: z.string().optional(),
});

export const EvalSampleSchema = z.looseObject({
  id: sampleIdSchema,
  epoch: num(),
  input: inputSchema,
  choices: z.array(z.string()).optional(),
  target: targetSchema,
  sandbox: SandboxEnvironmentSpecSchema.optional(),
  files: z.array(z.string()).optional(),
  setup: z.string().optional(),
  messages: z.array(ChatMessageSchema).default(() => []),
  output: ModelOutputSchema.default(emptyOutput),
  scores: z.record(z.string(), ScoreSchema).optional(),
  metadata: emptyRecord(),
  store: emptyRecord(),
  events: z.array(EventSchema).default(() => []),
  model_usage: usageRecord(),
  role_usage: usageRecord(),
  started_at: z.string().optional(),
  completed_at: z.string().optional(),
  total_time: num().optional(),
  working_time: num().optional(),
  uuid: z.string().optional(),
  error: EvalErrorSchema.optional(),
  error_retries: z.array(EvalErrorSchema).optional(),
  attachments: z.record(z.string(), z.string()).default(() => ({})),
  limit: EvalSampleLimitSchema.optional(),
});

export const EvalSampleSummarySchema = z.looseObject({
  id: sampleIdSchema,
  epoch: num(),
  input: inputSchema,
  choices: z.array(z.string()).optional(),
  target: targetSchema,
  metadata: emptyRecord(),
  scores: z.record(z.string(), ScoreSchema).optional(),
  model_usage: usageRecord(),
  role_usage: usageRecord(),
  started_at: z.string().optional(),
  completed_at: z.string().optional(),
  total_time: num().optional(),
  working_time: num().optional(),
  uuid: z.string().optional(),
  error: z.string().optional(),
  limit: z.string().optional(),
  limit_reason: z.string().optional(),
  retries: num().optional(),
  completed: z.boolean().default(false),
  message_count: num().optional(),
});

const GenerateConfigSchema = z.looseObject({});

const EvalPlanStepSchema = z.preprocess(
  (v) => (v && typeof v === 'object' && !('params_passed' in v) ? { ...v, params_passed: (v as { params?: unknown }).params ?? {} } : v),
  z.looseObject({ solver: z.string(), params: emptyRecord(), params_passed: emptyRecord() }),
);

export const EvalPlanSchema = z.looseObject({
  name: z.string().default('plan'),
  steps: z.array(EvalPlanStepSchema).default(() => []),
  finish: EvalPlanStepSchema.optional(),
  config: GenerateConfigSchema.default(() => ({})),
});

const EvalMetricDefinitionSchema = z.looseObject({ name: z.string(), options: record().optional() });

export const EvalSpecSchema = z.preprocess(
  (v) =>
    v && typeof v === 'object' && !('task_args_passed' in v)
      ? { ...v, task_args_passed: (v as { task_args?: unknown }).task_args ?? {} }
      : v,
  z.looseObject({
    eval_set_id: z.string().optional(),
    eval_id: z.string().default(''),
    run_id: z.string().default(''),
    created: z.string(),
    task: z.string(),
    task_id: z.string().default(''),
    task_version: z.union([num(), z.string()]).default(0),
    task_file: z.string().optional(),
    task_display_name: z.string().optional(),
    task_registry_name: z.string().optional(),
    task_attribs: emptyRecord(),
    task_args: emptyRecord(),
    task_args_passed: emptyRecord(),
    solver: z.string().optional(),
    solver_args: record().optional(),
    tags: z.array(z.string()).optional(),
    dataset: z.looseObject({
      name: z.string().optional(),
      location: z.string().optional(),
      samples: num().optional(),
      sample_ids: z.array(sampleIdSchema).optional(),
      shuffled: z.boolean().optional(),
    }),
    sandbox: SandboxEnvironmentSpecSchema.optional(),
    model: z.string(),
    model_generate_config: GenerateConfigSchema.default(() => ({})),
    model_base_url: z.string().optional(),
    model_args: emptyRecord(),
    model_roles: record().optional(),
    config: z.looseObject({}),
    revision: z
      .looseObject({ type: z.literal('git'), origin: z.string(), commit: z.string(), dirty: z.boolean().optional() })
      .optional(),
    packages: z.record(z.string(), z.string()).default(() => ({})),
    metadata: record().optional(),
    scorers: z
      .array(
        z.looseObject({
          name: z.string(),
          options: record().optional(),
          metrics: z
            .union([
              z.array(z.union([EvalMetricDefinitionSchema, z.record(z.string(), z.array(EvalMetricDefinitionSchema))])),
              z.record(z.string(), z.array(EvalMetricDefinitionSchema)),
            ])
            .optional(),
          metadata: record().optional(),
        }),
      )
      .optional(),
    metrics: z.unknown().optional(),
  }),
);

export const EvalMetricSchema = z.looseObject({
  name: z.string(),
  value: num(),
  params: emptyRecord(),
  group: z.string().optional(),
  metadata: record().optional(),
});

export const EvalScoreSchema = z.looseObject({
  name: z.string(),
  scorer: z.string(),
  reducer: z.string().optional(),
  scored_samples: num().optional(),
  unscored_samples: num().optional(),
  params: emptyRecord(),
  metrics: z.record(z.string(), EvalMetricSchema).default(() => ({})),
  metadata: record().optional(),
});

export const EvalResultsSchema = z.looseObject({
  total_samples: num().default(0),
  completed_samples: num().default(0),
  scores: z.array(EvalScoreSchema).default(() => []),
  headline: z
    .looseObject({
      scorer: z.string().optional(),
      score: z.string().optional(),
      metric: z.string().optional(),
      reducer: z.string().optional(),
    })
    .optional(),
  metadata: record().optional(),
});

export const EvalSampleReductionsSchema = z.looseObject({
  scorer: z.string(),
  reducer: z.string().optional(),
  samples: z.array(ScoreSchema.extend({ sample_id: sampleIdSchema.optional() })),
});

export const EvalStatsSchema = z.looseObject({
  started_at: z.string().default(''),
  completed_at: z.string().default(''),
  model_usage: usageRecord(),
  role_usage: usageRecord(),
  connection_limit_history: z.array(z.unknown()).default(() => []),
});

const emptyStats = (): z.output<typeof EvalStatsSchema> => ({
  started_at: '',
  completed_at: '',
  model_usage: {},
  role_usage: {},
  connection_limit_history: [],
});

export const LogStartSchema = z.looseObject({
  version: num(),
  eval: EvalSpecSchema,
  plan: EvalPlanSchema.default(() => ({ name: 'plan', steps: [], config: {} })),
});

/** `header.json` (and a whole log, when it carries samples). */
export const EvalLogSchema = z.looseObject({
  version: num().default(LOG_SCHEMA_VERSION),
  status: z.enum(['started', 'success', 'cancelled', 'error']).default('started'),
  eval: EvalSpecSchema,
  plan: EvalPlanSchema.default(() => ({ name: 'plan', steps: [], config: {} })),
  results: EvalResultsSchema.optional(),
  stats: EvalStatsSchema.default(emptyStats),
  error: EvalErrorSchema.optional(),
  invalidated: z.boolean().default(false),
  tags: z.array(z.string()).default(() => []),
  metadata: emptyRecord(),
  samples: z.array(EvalSampleSchema).optional(),
  reductions: z.array(EvalSampleReductionsSchema).optional(),
});

// Compile-time check that what the schemas produce has the shape of the types above.
type Assignable<From, To> = [From] extends [To] ? true : false;
const schemaMatchesTypes: [
  Assignable<z.output<typeof EvalLogSchema>, EvalLog>,
  Assignable<z.output<typeof EvalSampleSchema>, EvalSample>,
  Assignable<z.output<typeof EvalSampleSummarySchema>, EvalSampleSummary>,
  Assignable<z.output<typeof LogStartSchema>, LogStart>,
  Assignable<z.output<typeof EvalSampleReductionsSchema>, EvalSampleReductions>,
  Assignable<z.output<typeof ChatMessageSchema>, ChatMessage>,
  Assignable<z.output<typeof KnownEventSchema>, Event>,
] = [true, true, true, true, true, true, true];
void schemaMatchesTypes;
