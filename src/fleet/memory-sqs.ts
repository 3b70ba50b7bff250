/**
 * An in-process stand-in for the part of SQS the fleet uses, shared by every `MemoryJobQueue` of
 * one test (controller and workers see the same queues). It keeps SQS's semantics where the fleet
 * depends on them: visibility timeouts, receipt handles renewed on each receive, receive counts,
 * long polls that return as soon as a message is there, and a redrive that moves a message to its
 * dead-letter queue on the receive after `maxReceiveCount` (lazily, as SQS does). Where AWS and
 * moto differ, it follows AWS: changing the visibility with a stale handle fails
 * (`ReceiptHandleIsInvalid`, `MessageNotInflight`), and deleting with one removes nothing.
 *
 * It stays fast with 100,000 messages and a thousand waiting receivers (the control-plane
 * simulation): a receive takes messages from a list of visible ones and a heap of hidden ones
 * ordered by when they show again, not by scanning the queue; handles are found in a map; a long
 * poll sleeps until a message is sent or made visible (one waiter woken per message) or the
 * earliest hidden message shows, not on a fixed tick. Every wait is a timer, so a test that mocks
 * timers and `Date` runs it on its own clock.
 */
import { randomUUID } from 'node:crypto';
import { CloudError } from '../errors.js';

/** SQS's largest message body, in bytes (256 KiB): a larger send fails, as on AWS. */
export const SQS_MAX_BODY_BYTES = 262_144;

/** With a clock of its own (`now` passed in), how often a waiting long poll looks again, in ms: that clock can jump without a timer. */
const POLL_MS = 20;

interface MemoryMessage {
  id: string;
  body: string;
  receiveCount: number;
  /** Epoch ms from which the message can be received. */
  visibleAt: number;
  /** The handle of the latest receive. */
  handle?: string;
  /** Bumped at every change of visibility: list and heap entries of an older version are stale. */
  version: number;
  deleted: boolean;
}

/** A message's place in the visible list or the hidden heap, valid while the message keeps that version. */
interface Entry {
  at: number;
  m: MemoryMessage;
  version: number;
}

interface MemoryQueue {
  name: string;
  attributes: Record<string, string>;
  messages: Map<string, MemoryMessage>;
  /** Messages that were visible when listed (checked again when taken). */
  visible: Entry[];
  visibleHead: number;
  /** Messages hidden until `at` (in flight, or sent with a delay). */
  hidden: EntryHeap;
  byHandle: Map<string, MemoryMessage>;
  /** Long polls waiting on this queue. */
  waiters: Set<() => void>;
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
  private readonly now: () => number;
  private readonly ownClock: boolean;

  /**
   * @param now the clock visibility timeouts run on (epoch ms; default `Date.now`, read at each
   *   call so mocked timers apply). A test can pass its own to expire a visibility without
   *   waiting; long polls then look again every POLL_MS of real time.
   */
  constructor(now?: () => number) {
    this.now = now ?? (() => Date.now());
    this.ownClock = now !== undefined;
  }

  /** Creates a queue with SQS attribute names and values (`VisibilityTimeout`, `RedrivePolicy`, ...); an existing one is left as it is. */
  createQueue(name: string, attributes: Record<string, string>): void {
    if (this.queues.has(name)) return;
    this.queues.set(name, {
      name,
      attributes: { VisibilityTimeout: '30', ...attributes, QueueArn: `arn:aws:sqs:memory:000000000000:${name}`, CreatedTimestamp: String(++this.created) },
      messages: new Map(),
      visible: [],
      visibleHead: 0,
      hidden: new EntryHeap(),
      byHandle: new Map(),
      waiters: new Set(),
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
    const q = this.queues.get(name);
    this.queues.delete(name);
    // Waiting receives look again and find the queue gone.
    if (q) for (const wake of [...q.waiters]) wake();
  }

  /** Sends a message, invisible for `delaySeconds` (SQS's DelaySeconds). */
  send(name: string, body: string, delaySeconds = 0): void {
    const q = this.queue(name);
    if (Buffer.byteLength(body, 'utf8') > SQS_MAX_BODY_BYTES) {
      throw new CloudError(`sending a message: InvalidParameterValue: the body must be at most ${SQS_MAX_BODY_BYTES} bytes`, false, { code: 'InvalidParameterValue', status: 400 });
    }
    this.add(q, { id: randomUUID(), body, receiveCount: 0, visibleAt: delaySeconds > 0 ? this.now() + delaySeconds * 1000 : 0, version: 0, deleted: false });
  }

  /** Long-polls up to `max` messages for up to `waitSeconds`. */
  async receive(name: string, max: number, waitSeconds: number): Promise<MemoryReceived[]> {
    const deadline = Date.now() + waitSeconds * 1000;
    for (;;) {
      const q = this.queue(name);
      const got = this.take(q, max);
      const left = deadline - Date.now();
      if (got.length > 0 || left <= 0) return got;
      const next = q.hidden.peek();
      let wait = next ? Math.min(left, Math.max(1, next.at - this.now())) : left;
      if (this.ownClock) wait = Math.min(wait, POLL_MS);
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          q.waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, wait);
        q.waiters.add(wake);
      });
    }
  }

  changeVisibility(name: string, handle: string, seconds: number): void {
    const q = this.queue(name);
    const m = q.byHandle.get(handle);
    if (!m || m.handle !== handle) throw new CloudError(`changing visibility: ReceiptHandleIsInvalid: the handle is not the message's latest`, false, { code: 'ReceiptHandleIsInvalid', status: 400 });
    const now = this.now();
    if (m.visibleAt <= now) throw new CloudError('changing visibility: MessageNotInflight: the message is not in flight', false, { code: 'MessageNotInflight', status: 400 });
    m.visibleAt = now + seconds * 1000;
    this.place(q, m, now);
  }

  deleteMessage(name: string, handle: string): void {
    const q = this.queue(name);
    const m = q.byHandle.get(handle);
    if (!m || m.handle !== handle) return;
    q.byHandle.delete(handle);
    q.messages.delete(m.id);
    m.deleted = true;
  }

  depth(name: string): { visible: number; inFlight: number; delayed: number } {
    const now = this.now();
    let visible = 0;
    let inFlight = 0;
    let delayed = 0;
    for (const m of this.queue(name).messages.values()) {
      if (m.visibleAt <= now) visible++;
      // Never received and not yet visible: sent with a delay (SQS counts these apart).
      else if (m.receiveCount === 0) delayed++;
      else inFlight++;
    }
    return { visible, inFlight, delayed };
  }

  private add(q: MemoryQueue, m: MemoryMessage): void {
    q.messages.set(m.id, m);
    this.place(q, m, this.now());
  }

  /** Lists a message where its visibility puts it (a new version: its older entries are stale), waking a waiter when it is visible. */
  private place(q: MemoryQueue, m: MemoryMessage, now: number): void {
    m.version++;
    const e: Entry = { at: m.visibleAt, m, version: m.version };
    if (m.visibleAt <= now) {
      q.visible.push(e);
      const wake = q.waiters.values().next();
      if (!wake.done) wake.value();
    } else {
      const first = q.hidden.peek();
      q.hidden.push(e);
      // A sooner show than any waiter sleeps for: wake one to sleep again until then.
      if (!first || e.at < first.at) {
        const wake = q.waiters.values().next();
        if (!wake.done) wake.value();
      }
    }
  }

  private take(q: MemoryQueue, max: number): MemoryReceived[] {
    const now = this.now();
    // Hidden messages whose time came are visible now.
    for (let e = q.hidden.peek(); e && e.at <= now; e = q.hidden.peek()) {
      q.hidden.pop();
      if (e.version === e.m.version && !e.m.deleted) q.visible.push(e);
    }
    const redrive = parseRedrive(q.attributes.RedrivePolicy);
    const visibility = Number(q.attributes.VisibilityTimeout);
    const out: MemoryReceived[] = [];
    while (out.length < max && q.visibleHead < q.visible.length) {
      const e = q.visible[q.visibleHead++]!;
      const m = e.m;
      if (e.version !== m.version || m.deleted || m.visibleAt > now) continue;
      if (redrive && m.receiveCount >= redrive.maxReceiveCount) {
        const dead = [...this.queues.values()].find((d) => d.attributes.QueueArn === redrive.deadLetterTargetArn);
        if (dead) {
          q.messages.delete(m.id);
          if (m.handle) q.byHandle.delete(m.handle);
          m.deleted = true;
          this.add(dead, { id: m.id, body: m.body, receiveCount: m.receiveCount, visibleAt: 0, version: 0, deleted: false });
          continue;
        }
      }
      m.receiveCount++;
      if (m.handle) q.byHandle.delete(m.handle);
      m.handle = `${m.id}#${randomUUID()}`;
      q.byHandle.set(m.handle, m);
      m.visibleAt = now + visibility * 1000;
      m.version++;
      q.hidden.push({ at: m.visibleAt, m, version: m.version });
      out.push({ body: m.body, receiptHandle: m.handle, receiveCount: m.receiveCount, messageId: m.id });
    }
    // Drop the taken part of the list now and then (it only grows at its end).
    if (q.visibleHead > 1024 && q.visibleHead * 2 > q.visible.length) {
      q.visible.splice(0, q.visibleHead);
      q.visibleHead = 0;
    }
    return out;
  }

  private queue(name: string): MemoryQueue {
    const q = this.queues.get(name);
    if (!q) throw new CloudError(`queue ${name} does not exist`, false, { code: 'QueueDoesNotExist', status: 400 });
    return q;
  }
}

/** A binary min-heap of entries by `at`. */
class EntryHeap {
  private readonly a: Entry[] = [];

  peek(): Entry | undefined {
    return this.a[0];
  }

  push(e: Entry): void {
    const a = this.a;
    a.push(e);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (a[p]!.at <= e.at) break;
      a[i] = a[p]!;
      i = p;
    }
    a[i] = e;
  }

  pop(): Entry | undefined {
    const a = this.a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= a.length) break;
        const r = l + 1;
        const c = r < a.length && a[r]!.at < a[l]!.at ? r : l;
        if (a[c]!.at >= last.at) break;
        a[i] = a[c]!;
        i = c;
      }
      a[i] = last;
    }
    return top;
  }
}

function parseRedrive(json: string | undefined): { deadLetterTargetArn: string; maxReceiveCount: number } | undefined {
  if (!json) return undefined;
  const r = JSON.parse(json) as { deadLetterTargetArn: string; maxReceiveCount: unknown };
  return { deadLetterTargetArn: r.deadLetterTargetArn, maxReceiveCount: Number(r.maxReceiveCount) };
}
