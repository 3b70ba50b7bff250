/**
 * The summary of a finished sample, thinned the way Inspect thins it (`EvalSample.summary()` and
 * `log/_util.py`) so summary files stay small whatever the samples hold: long input and target
 * text is cut at 5120 characters, non-text input parts become placeholders, long metadata values
 * are dropped, and score explanations are shortened to 1024 characters.
 */
import type { ChatMessage, Content, EvalSample, EvalSampleSummary, Score } from './types.js';

const MAX_TEXT_LENGTH = 5120;
const THIN_TEXT_WIDTH = 1024;
const THIN_TEXT_SCAN = THIN_TEXT_WIDTH * 8;
const MAX_METADATA_VALUE_JSON = 1024;

export function sampleSummary(sample: EvalSample): EvalSampleSummary {
  const summary: EvalSampleSummary = {
    id: sample.id,
    epoch: sample.epoch,
    input: thinInput(sample.input),
    choices: sample.choices,
    target: Array.isArray(sample.target) ? sample.target.map((t) => truncateText(t)) : truncateText(sample.target),
    metadata: thinMetadata(sample.metadata),
    scores: sample.scores ? thinScores(sample.scores) : undefined,
    model_usage: sample.model_usage,
    role_usage: sample.role_usage,
    started_at: sample.started_at,
    completed_at: sample.completed_at,
    total_time: sample.total_time,
    working_time: sample.working_time,
    uuid: sample.uuid,
    error: sample.error?.message,
    limit: sample.limit?.type,
    limit_reason: sample.limit?.reason,
    retries: sample.error_retries?.length,
    completed: true,
    message_count: sample.messages.length,
  };
  return summary;
}

function thinInput(input: string | ChatMessage[]): string | ChatMessage[] {
  if (typeof input === 'string') return truncateText(input);
  return input.map((message) => {
    if (typeof message.content === 'string') {
      const content = truncateText(message.content);
      return content === message.content ? message : { ...message, content };
    }
    const content = message.content.map(
      (part): Content =>
        part.type === 'text'
          ? { ...part, text: truncateText(part.text) }
          : { type: 'text', text: `(${part.type.charAt(0).toUpperCase()}${part.type.slice(1)})` },
    );
    return { ...message, content };
  });
}

function truncateText(text: string, max = MAX_TEXT_LENGTH): string {
  return text.length > max ? `${text.slice(0, max)}...\n(content truncated)` : text;
}

/** Python's `textwrap.shorten(text, 1024, placeholder="...")`: collapse whitespace, then cut at a word. */
export function thinText(text: string): string {
  const collapsed = text.slice(0, THIN_TEXT_SCAN).split(/\s+/).filter(Boolean);
  const joined = collapsed.join(' ');
  if (joined.length <= THIN_TEXT_WIDTH) return joined;
  const placeholder = '...';
  let out = '';
  for (const word of collapsed) {
    const next = out ? `${out} ${word}` : word;
    if (next.length + placeholder.length > THIN_TEXT_WIDTH) break;
    out = next;
  }
  return out + placeholder;
}

function thinMetadata(metadata: Record<string, unknown>): Record<string, unknown> {
  const thinned: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(metadata)) {
    if (value === undefined) continue;
    if (typeof value === 'number' || typeof value === 'boolean' || value === null) thinned[key] = value;
    else if (typeof value === 'string') thinned[key] = thinText(value);
    else thinned[key] = jsonLength(value) <= MAX_METADATA_VALUE_JSON ? value : 'Key removed from summary (> 1k)';
  }
  return thinned;
}

function thinScores(scores: Record<string, Score>): Record<string, Score> {
  const thinned: Record<string, Score> = {};
  for (const [name, score] of Object.entries(scores)) {
    thinned[name] = {
      value: score.value,
      answer: score.answer === undefined ? undefined : thinText(score.answer),
      explanation: score.explanation === undefined ? undefined : thinText(score.explanation),
      metadata: score.metadata === undefined ? undefined : thinMetadata(score.metadata),
      history: [],
    };
  }
  return thinned;
}

function jsonLength(value: unknown): number {
  try {
    return JSON.stringify(value)?.length ?? 0;
  } catch {
    return Infinity;
  }
}
