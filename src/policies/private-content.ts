import type { ChatMessage, ChatMessageAssistant } from '../log/types.js';

/**
 * What a monitor must not see, marked in the log the way Inspect keeps it (message `metadata`,
 * which `read_eval_log` preserves):
 * - `metadata.private: true` on a whole message: the attack policy's side-task instructions and
 *   its private planning (the prompt and the model's plan).
 * - `metadata.private_content: ["reasoning"]` on an assistant message whose `reasoning` parts
 *   (extended thinking, reasoning_content) are private; its text and tool calls are not.
 * In Python: `[m for m in sample.messages if not (m.metadata or {}).get("private")]`, then drop
 * `ContentReasoning` parts. Raw provider payloads (`model` events' `call`) are not filtered: a
 * monitor reads `messages`.
 */
export const PRIVATE_KEY = 'private';
export const PRIVATE_CONTENT_KEY = 'private_content';

/** The message, marked private as a whole. */
export function privateMessage<M extends ChatMessage>(m: M): M {
  return { ...m, metadata: { ...m.metadata, [PRIVATE_KEY]: true } };
}

export function isPrivate(m: ChatMessage): boolean {
  return m.metadata?.[PRIVATE_KEY] === true;
}

/** Marks an assistant message's reasoning parts as private (a no-op when it has none). */
export function markReasoningPrivate(m: ChatMessageAssistant): ChatMessageAssistant {
  if (typeof m.content === 'string' || !m.content.some((c) => c.type === 'reasoning')) return m;
  return { ...m, metadata: { ...m.metadata, [PRIVATE_CONTENT_KEY]: ['reasoning'] } };
}

/** The conversation a monitor may read: no private messages, no reasoning. */
export function monitorView(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages
    .filter((m) => !isPrivate(m))
    .map((m) => {
      if (typeof m.content === 'string') return m;
      const content = m.content.filter((c) => c.type !== 'reasoning');
      return content.length === m.content.length ? m : ({ ...m, content } as ChatMessage);
    });
}
