/**
 * An in-process stand-in for the part of SQS the fleet uses, shared by every `MemoryJobQueue` of
 * one test (controller and workers see the same queues). It keeps SQS's semantics where the fleet
 * depends on them: visibility timeouts, receipt handles renewed on each receive, receive counts,
 * long polls that return as soon as a message is there, and a redrive that moves a message to its
 * dead-letter queue on the receive after `maxReceiveCount` (lazily, as SQS does). Where AWS and
 * moto differ, it follows AWS: changing the visibility with a stale handle fails
 * (`ReceiptHandleIsInvalid`, `MessageNotInflight`), and deleting with one removes nothing.
 */
import { randomUUID } from 'node:crypto';
import { CloudError } from '../errors.js';

/** SQS's largest message body, in bytes (256 KiB): a larger send fails, as on AWS. */
export const SQS_MAX_BODY_BYTES = 262_144;

/** How often a waiting long poll looks again, in ms (small against the seconds tests scale visibility to). */
const POLL_MS = 20;

interface MemoryMessage {
  id: string;
  body: string;
  receiveCount: number;
  /** Epoch ms from which the message can be received. */
  visibleAt: number;
  /** The handle of the latest receive. */
  handle?: string;
}

interface MemoryQueue {
  name: string;
  attributes: Record<string, string>;
  messages: MemoryMessage[];
}

export interface MemoryReceived {
  body: string;
  receiptHandle: string;
  receiveCount: number;
  messageId: string;
}

export class MemorySqs {
  private readonly queues = new Map<string, MemoryQueue>();
  /** Stands in for SQS's CreatedTimestamp: distinct for each queue created. */
  private created = 0;

  /**
   * @param now the clock visibility timeouts run on (epoch ms; default the real one). A test can
   *   pass its own to expire a visibility without waiting; long polls still wait in real time.
   */
  constructor(private readonly now: () => number = Date.now) {}

  /** Creates a queue with SQS attribute names and values (`VisibilityTimeout`, `RedrivePolicy`, ...); an existing one is left as it is. */
  createQueue(name: string, attributes: Record<string, string>): void {
    if (this.queues.has(name)) return;
    this.queues.set(name, {
      name,
      attributes: { VisibilityTimeout: '30', ...attributes, QueueArn: `arn:aws:sqs:memory:000000000000:${name}`, CreatedTimestamp: String(++this.created) },
      messages: [],
    });
  }

  has(name: string): boolean {
    return this.queues.has(name);
  }

  attributes(name: string): Record<string, string> {
    return { ...this.queue(name).attributes };
  }

  setAttributes(name: string, attributes: Record<string, string>): void {
    Object.assign(this.queue(name).attributes, attributes);
  }

  deleteQueue(name: string): void {
    this.queues.delete(name);
  }

  /** Sends a message, invisible for `delaySeconds` (SQS's DelaySeconds). */
  send(name: string, body: string, delaySeconds = 0): void {
    const q = this.queue(name);
    if (Buffer.byteLength(body, 'utf8') > SQS_MAX_BODY_BYTES) {
      throw new CloudError(`sending a message: InvalidParameterValue: the body must be at most ${SQS_MAX_BODY_BYTES} bytes`, false, { code: 'InvalidParameterValue', status: 400 });
    }
    q.messages.push({ id: randomUUID(), body, receiveCount: 0, visibleAt: delaySeconds > 0 ? this.now() + delaySeconds * 1000 : 0 });
  }

  /** Long-polls up to `max` messages for up to `waitSeconds`. */
  async receive(name: string, max: number, waitSeconds: number): Promise<MemoryReceived[]> {
    const deadline = Date.now() + waitSeconds * 1000;
    for (;;) {
      const got = this.take(this.queue(name), max);
      const left = deadline - Date.now();
      if (got.length > 0 || left <= 0) return got;
      await new Promise((r) => setTimeout(r, Math.min(POLL_MS, left)));
    }
  }

  changeVisibility(name: string, handle: string, seconds: number): void {
    const m = this.queue(name).messages.find((x) => x.handle === handle);
    if (!m) throw new CloudError(`changing visibility: ReceiptHandleIsInvalid: the handle is not the message's latest`, false, { code: 'ReceiptHandleIsInvalid', status: 400 });
    if (m.visibleAt <= this.now()) throw new CloudError('changing visibility: MessageNotInflight: the message is not in flight', false, { code: 'MessageNotInflight', status: 400 });
    m.visibleAt = this.now() + seconds * 1000;
  }

  deleteMessage(name: string, handle: string): void {
    const q = this.queue(name);
    const i = q.messages.findIndex((x) => x.handle === handle);
    if (i >= 0) q.messages.splice(i, 1);
  }

  depth(name: string): { visible: number; inFlight: number; delayed: number } {
    const now = this.now();
    const messages = this.queue(name).messages;
    // Never received and not yet visible: sent with a delay (SQS counts these apart).
    const delayed = messages.filter((m) => m.visibleAt > now && m.receiveCount === 0).length;
    const inFlight = messages.filter((m) => m.visibleAt > now).length - delayed;
    return { visible: messages.length - inFlight - delayed, inFlight, delayed };
  }

  private take(q: MemoryQueue, max: number): MemoryReceived[] {
    const now = this.now();
    const redrive = parseRedrive(q.attributes.RedrivePolicy);
    const visibility = Number(q.attributes.VisibilityTimeout);
    const out: MemoryReceived[] = [];
    for (const m of [...q.messages]) {
      if (out.length >= max) break;
      if (m.visibleAt > now) continue;
      if (redrive && m.receiveCount >= redrive.maxReceiveCount) {
        const dead = [...this.queues.values()].find((d) => d.attributes.QueueArn === redrive.deadLetterTargetArn);
        if (dead) {
          q.messages.splice(q.messages.indexOf(m), 1);
          dead.messages.push({ id: m.id, body: m.body, receiveCount: m.receiveCount, visibleAt: 0 });
          continue;
        }
      }
      m.receiveCount++;
      m.handle = `${m.id}#${randomUUID()}`;
      m.visibleAt = now + visibility * 1000;
      out.push({ body: m.body, receiptHandle: m.handle, receiveCount: m.receiveCount, messageId: m.id });
    }
    return out;
  }

  private queue(name: string): MemoryQueue {
    const q = this.queues.get(name);
    if (!q) throw new CloudError(`queue ${name} does not exist`, false, { code: 'QueueDoesNotExist', status: 400 });
    return q;
  }
}

function parseRedrive(json: string | undefined): { deadLetterTargetArn: string; maxReceiveCount: number } | undefined {
  if (!json) return undefined;
  const r = JSON.parse(json) as { deadLetterTargetArn: string; maxReceiveCount: unknown };
  return { deadLetterTargetArn: r.deadLetterTargetArn, maxReceiveCount: Number(r.maxReceiveCount) };
}
