import { createHash, randomUUID } from 'node:crypto';
import type { ChatMessage, Event, ModelUsage } from '../log/types.js';

type EventOf<K extends Event['event']> = Extract<Event, { event: K }>;

/**
 * What happens in one sample, in the order it happens: the conversation (messages) and the
 * event stream (model calls, tool calls, sandbox actions, scores). Becomes the EvalSample.
 */
export class Transcript {
  readonly messages: ChatMessage[] = [];
  readonly events: Event[] = [];
  readonly modelUsage: Record<string, ModelUsage> = {};
  /** Usage of the calls made through a model role (`untrusted`, `trusted`), by role: the sample's `role_usage`. */
  readonly roleUsage: Record<string, ModelUsage> = {};
  /** Long texts that events refer to as `attachment://<hash>` (Inspect's way to avoid repeating them). */
  readonly attachments: Record<string, string> = {};
  private readonly attachmentRefs = new Map<string, string>();
  readonly startedAt = new Date();
  private readonly startedMs = performance.now();

  /** Seconds since the sample started. */
  elapsed(): number {
    return (performance.now() - this.startedMs) / 1000;
  }

  /** Appends an event, stamping its time; returns it so callers can fill in results later. */
  event<K extends Event['event']>(body: Omit<EventOf<K>, 'timestamp' | 'working_start'> & { event: K }): EventOf<K> {
    const e = { uuid: randomUUID(), timestamp: new Date().toISOString(), working_start: this.elapsed(), ...body } as unknown as EventOf<K>;
    this.events.push(e);
    return e;
  }

  message<M extends ChatMessage>(m: M): M {
    const withId = { id: m.id ?? randomUUID(), ...m };
    this.messages.push(withId);
    return withId;
  }

  /** Stores `text` once and returns the `attachment://<hash>` reference that stands for it. */
  attach(text: string): string {
    let ref = this.attachmentRefs.get(text);
    if (ref === undefined) {
      const hash = createHash('md5').update(text).digest('hex');
      this.attachments[hash] = text;
      ref = `attachment://${hash}`;
      this.attachmentRefs.set(text, ref);
    }
    return ref;
  }

  addUsage(model: string, usage: ModelUsage, role?: string): void {
    addTo(this.modelUsage, model, usage);
    if (role) addTo(this.roleUsage, role, usage);
  }
}

function addTo(into: Record<string, ModelUsage>, key: string, usage: ModelUsage): void {
  const cur = into[key];
  if (!cur) {
    into[key] = { ...usage };
    return;
  }
  const sum = cur as unknown as Record<string, number>;
  for (const [k, v] of Object.entries(usage)) {
    if (typeof v === 'number') sum[k] = (sum[k] ?? 0) + v;
  }
}
