import type { z } from 'zod';
import { SampleError, errorMessage } from '../errors.js';

/**
 * The JSON object in a model's reply: the first ```json fenced block, else the text from the
 * first `{` to the last `}`; checked against `schema`. A reply without one is a SampleError
 * naming what was wrong, so the stage can say why a candidate failed.
 */
export function jsonReply<T extends z.ZodType>(text: string, schema: T, what: string): z.infer<T> {
  const fenced = /```(?:json)?\s*\n([\s\S]*?)\n```/.exec(text);
  const body = fenced ? fenced[1]! : text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1);
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    throw new SampleError(`the model's ${what} is not valid JSON (${errorMessage(e)})`);
  }
  const r = schema.safeParse(raw);
  if (!r.success) {
    throw new SampleError(`the model's ${what} lacks fields: ${r.error.issues.map((i) => `${i.path.join('.') || '(reply)'}: ${i.message}`).join('; ')}`);
  }
  return r.data;
}
