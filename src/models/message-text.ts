import type { Content } from '../log/types.js';

/** The plain text of a message's content (text parts joined by newlines; other parts dropped). */
export function textOf(content: string | Content[]): string {
  if (typeof content === 'string') return content;
  return content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');
}
