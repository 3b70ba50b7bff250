/**
 * `JobQueue` in memory, over a `MemorySqs` shared by the controller and workers of one test: the
 * same semantics as `SqsJobQueue` (test/fleet/job-queue-conformance runs against both), so the
 * controller's and the worker's logic can be tested in milliseconds.
 */
import { doneMessageSchema, fleetNames, jobMessageSchema, parseMessage, type DoneMessage, type FleetNames, type JobMessage, type ParsedJobMessage, type RejectedMessage } from './protocol.js';
import type { MemoryReceived, MemorySqs } from './memory-sqs.js';
import { attributeChanges, queueAttributes, type QueueRole } from './sqs-job-queue.js';
import { SQS_BATCH, type Delivery, type JobQueue, type QueueCreation, type QueueDepth, type QueueSettings, type ReceiveOptions } from './types.js';
import type { z } from 'zod';

export class MemoryJobQueue implements JobQueue {
  readonly fleetId: string;
  readonly names: FleetNames;

  constructor(
    private readonly sqs: MemorySqs,
    fleetId: string,
    queuePrefix: string,
  ) {
    this.fleetId = fleetId;
    this.names = fleetNames(fleetId, queuePrefix);
  }

  async create(settings: QueueSettings): Promise<QueueCreation> {
    const reconciled: string[] = [];
    let created = false;
    const ensure = (role: QueueRole, want: Record<string, string>) => {
      const name = this.queueName(role);
      if (!this.sqs.has(name)) {
        this.sqs.createQueue(name, want);
        created = true;
        return;
      }
      const { differ, lines } = attributeChanges(role, this.sqs.attributes(name), want);
      reconciled.push(...lines);
      if (lines.length > 0) this.sqs.setAttributes(name, differ);
    };
    ensure('dead', queueAttributes('dead', settings));
    ensure('work', queueAttributes('work', settings, this.sqs.attributes(this.names.deadLetterQueue).QueueArn));
    ensure('done', queueAttributes('done', settings));
    return { created, reconciled, queueId: `${this.names.workQueue}@${this.sqs.attributes(this.names.workQueue).CreatedTimestamp}` };
  }

  async enqueue(jobs: readonly JobMessage[], o: { delaySeconds?: number } = {}): Promise<{ sent: number; failed: number }> {
    const name = this.names.workQueue;
    let failed = 0;
    for (const j of jobs) {
      try {
        this.sqs.send(name, JSON.stringify(j), o.delaySeconds);
      } catch {
        // As SQS refuses an entry of a batch (a body over its limit): counted, not thrown.
        failed++;
      }
    }
    return { sent: jobs.length - failed, failed };
  }

  receive(o: ReceiveOptions): Promise<Delivery<ParsedJobMessage>[]> {
    return this.receiveFrom('work', jobMessageSchema, o);
  }

  async deadLetter(job: JobMessage | RejectedMessage): Promise<void> {
    this.sqs.send(this.names.deadLetterQueue, JSON.stringify(job));
  }

  async extend(receiptHandle: string, seconds: number): Promise<void> {
    this.sqs.changeVisibility(this.names.workQueue, receiptHandle, Math.round(seconds));
  }

  release(receiptHandle: string): Promise<void> {
    return this.extend(receiptHandle, 0);
  }

  async delete(receiptHandle: string): Promise<void> {
    this.sqs.deleteMessage(this.names.workQueue, receiptHandle);
  }

  async sendDone(done: DoneMessage): Promise<void> {
    this.sqs.send(this.names.doneQueue, JSON.stringify(done));
  }

  receiveDone(o: ReceiveOptions): Promise<Delivery<DoneMessage>[]> {
    return this.receiveFrom('done', doneMessageSchema, o);
  }

  async deleteDone(receiptHandle: string): Promise<void> {
    this.sqs.deleteMessage(this.names.doneQueue, receiptHandle);
  }

  receiveDead(o: ReceiveOptions): Promise<Delivery<ParsedJobMessage>[]> {
    return this.receiveFrom('dead', jobMessageSchema, o);
  }

  async deleteDead(receiptHandle: string): Promise<void> {
    this.sqs.deleteMessage(this.names.deadLetterQueue, receiptHandle);
  }

  async depth(): Promise<{ work: QueueDepth; done: QueueDepth; dead: QueueDepth }> {
    return { work: this.sqs.depth(this.names.workQueue), done: this.sqs.depth(this.names.doneQueue), dead: this.sqs.depth(this.names.deadLetterQueue) };
  }

  async exists(): Promise<boolean> {
    return this.sqs.has(this.names.workQueue);
  }

  async deleteQueues(): Promise<void> {
    for (const role of ['work', 'done', 'dead'] as const) this.sqs.deleteQueue(this.queueName(role));
  }

  private queueName(role: QueueRole): string {
    return role === 'work' ? this.names.workQueue : role === 'done' ? this.names.doneQueue : this.names.deadLetterQueue;
  }

  private async receiveFrom<T>(role: QueueRole, schema: z.ZodType<T>, o: ReceiveOptions): Promise<Delivery<T>[]> {
    const got = await this.sqs.receive(this.queueName(role), Math.max(1, Math.min(SQS_BATCH, o.max)), Math.max(0, Math.min(20, o.waitSeconds)));
    return got.map((m: MemoryReceived) => ({ ...parseMessage(schema, m.body), body: m.body, receiptHandle: m.receiptHandle, receiveCount: m.receiveCount, messageId: m.messageId }));
  }
}
