/**
 * The fleet's queues and objects, over the AWS SDK: one place for every SQS and S3 call the
 * controller and the workers make, so both sides agree on names, attributes and encodings.
 */
import { GetObjectCommand, ListObjectsV2Command, NoSuchKey, PutObjectCommand, HeadBucketCommand, CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { CloudError } from '../errors.js';
import { fleetNames, jobIdOfKey, type FleetNames } from './protocol.js';

/** Long poll length (SQS's maximum). */
export const LONG_POLL_SECONDS = 20;
/** SQS takes at most 10 entries a batch. */
const BATCH = 10;

export interface FleetQueues {
  work: string;
  done: string;
  deadLetter: string;
}

export interface ReceivedMessage {
  body: string;
  receiptHandle: string;
  /** SQS's ApproximateReceiveCount: 1 on first delivery. */
  receiveCount: number;
  messageId: string;
}

export interface FleetStoreOptions {
  sqs: SQSClient;
  s3: S3Client;
  bucket: string;
  fleetId: string;
  queuePrefix: string;
}

export class FleetStore {
  readonly names: FleetNames;
  private queues?: FleetQueues;

  constructor(private readonly o: FleetStoreOptions) {
    this.names = fleetNames(o.fleetId, o.queuePrefix);
  }

  get fleetId(): string {
    return this.o.fleetId;
  }

  get bucket(): string {
    return this.o.bucket;
  }

  /**
   * Creates the three queues when missing (CreateQueue is idempotent for equal attributes):
   * jobs received `maxReceiveCount` times move to the dead-letter queue.
   */
  async ensureQueues(o: { visibilityTimeout: number; maxReceiveCount: number }): Promise<FleetQueues> {
    const dlq = await this.call('creating the dead-letter queue', () =>
      this.o.sqs.send(new CreateQueueCommand({ QueueName: this.names.deadLetterQueue, Attributes: { MessageRetentionPeriod: '1209600' } })),
    );
    const dlqArn = await this.queueArn(dlq.QueueUrl!);
    const work = await this.call('creating the work queue', () =>
      this.o.sqs.send(
        new CreateQueueCommand({
          QueueName: this.names.workQueue,
          Attributes: {
            VisibilityTimeout: String(o.visibilityTimeout),
            MessageRetentionPeriod: '1209600',
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: String(o.maxReceiveCount) }),
          },
        }),
      ),
    );
    const done = await this.call('creating the done queue', () =>
      this.o.sqs.send(new CreateQueueCommand({ QueueName: this.names.doneQueue, Attributes: { MessageRetentionPeriod: '1209600' } })),
    );
    this.queues = { work: work.QueueUrl!, done: done.QueueUrl!, deadLetter: dlq.QueueUrl! };
    return this.queues;
  }

  /** The existing queues' URLs (a worker never creates them); throws CloudError when they are gone. */
  async openQueues(): Promise<FleetQueues> {
    if (this.queues) return this.queues;
    const url = async (name: string) => {
      try {
        return (await this.o.sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl!;
      } catch (e) {
        if (e instanceof QueueDoesNotExist || (e as { name?: string }).name === 'AWS.SimpleQueueService.NonExistentQueue') {
          throw new CloudError(`queue ${name} does not exist (the fleet was torn down?)`, false);
        }
        throw new CloudError(`looking up queue ${name}: ${(e as Error).message}`, transient(e));
      }
    };
    this.queues = { work: await url(this.names.workQueue), done: await url(this.names.doneQueue), deadLetter: await url(this.names.deadLetterQueue) };
    return this.queues;
  }

  async deleteQueues(): Promise<void> {
    const q = await this.openQueues().catch(() => undefined);
    if (!q) return;
    for (const url of [q.work, q.done, q.deadLetter]) await this.o.sqs.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
  }

  /** Sends bodies in batches of 10; throws when any entry fails after one retry of the failures. */
  async sendAll(queueUrl: string, bodies: string[]): Promise<void> {
    for (let i = 0; i < bodies.length; i += BATCH) {
      let entries = bodies.slice(i, i + BATCH).map((body, j) => ({ Id: String(i + j), MessageBody: body }));
      for (let attempt = 1; entries.length > 0; attempt++) {
        const r = await this.call('sending jobs', () => this.o.sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries })));
        const failed = new Set((r.Failed ?? []).map((f) => f.Id));
        if (failed.size > 0 && attempt >= 3) throw new CloudError(`SQS refused ${failed.size} message(s): ${r.Failed![0]!.Message ?? r.Failed![0]!.Code}`, true);
        entries = entries.filter((e) => failed.has(e.Id));
      }
    }
  }

  async send(queueUrl: string, body: string): Promise<void> {
    await this.call('sending a message', () => this.o.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body })));
  }

  /** Long-polls up to `max` messages (1-10). */
  async receive(queueUrl: string, o: { max: number; waitSeconds?: number; visibilityTimeout?: number; signal?: AbortSignal }): Promise<ReceivedMessage[]> {
    const r = await this.o.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: Math.max(1, Math.min(BATCH, o.max)),
        WaitTimeSeconds: o.waitSeconds ?? LONG_POLL_SECONDS,
        ...(o.visibilityTimeout !== undefined ? { VisibilityTimeout: o.visibilityTimeout } : {}),
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
      { abortSignal: o.signal },
    );
    return (r.Messages ?? []).map(toReceived);
  }

  async extendVisibility(queueUrl: string, receiptHandle: string, seconds: number): Promise<void> {
    await this.o.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: receiptHandle, VisibilityTimeout: seconds }));
  }

  async delete(queueUrl: string, receiptHandle: string): Promise<void> {
    await this.call('deleting a message', () => this.o.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: receiptHandle })));
  }

  /** Messages waiting and in flight, as SQS estimates them. */
  async depth(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
    const r = await this.o.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    return {
      visible: Number(r.Attributes?.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(r.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0),
    };
  }

  /** Creates the bucket when this account can and it is missing (workers only ever read and write). */
  async ensureBucket(): Promise<void> {
    try {
      await this.o.s3.send(new HeadBucketCommand({ Bucket: this.o.bucket }));
    } catch (e) {
      const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status !== 404) throw new CloudError(`cannot reach bucket ${this.o.bucket}: ${(e as Error).message}`, transient(e));
      await this.call(`creating bucket ${this.o.bucket}`, () => this.o.s3.send(new CreateBucketCommand({ Bucket: this.o.bucket })));
    }
  }

  async put(key: string, body: Uint8Array | string, contentType = 'application/octet-stream'): Promise<void> {
    await this.call(`uploading s3://${this.o.bucket}/${key}`, () =>
      this.o.s3.send(new PutObjectCommand({ Bucket: this.o.bucket, Key: key, Body: body, ContentType: contentType })),
    );
  }

  /** The object's bytes, or undefined when there is none. */
  async get(key: string): Promise<Buffer | undefined> {
    try {
      const r = await this.o.s3.send(new GetObjectCommand({ Bucket: this.o.bucket, Key: key }));
      return Buffer.from(await r.Body!.transformToByteArray());
    } catch (e) {
      if (e instanceof NoSuchKey || (e as { name?: string }).name === 'NoSuchKey') return undefined;
      throw new CloudError(`downloading s3://${this.o.bucket}/${key}: ${(e as Error).message}`, transient(e));
    }
  }

  /** Job ids that have a result in the bucket (all pages). */
  async completedJobIds(): Promise<Set<string>> {
    const ids = new Set<string>();
    let token: string | undefined;
    do {
      const r = await this.call('listing results', () =>
        this.o.s3.send(new ListObjectsV2Command({ Bucket: this.o.bucket, Prefix: this.names.resultPrefix, ContinuationToken: token })),
      );
      for (const o of r.Contents ?? []) {
        const id = o.Key ? jobIdOfKey(this.o.fleetId, o.Key) : undefined;
        if (id) ids.add(id);
      }
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return ids;
  }

  private async queueArn(url: string): Promise<string> {
    const r = await this.call('reading queue attributes', () => this.o.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] })));
    const arn = r.Attributes?.QueueArn;
    if (!arn) throw new CloudError(`queue ${url} has no ARN`, false);
    return arn;
  }

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof CloudError) throw e;
      throw new CloudError(`${what}: ${(e as Error).message}`, transient(e));
    }
  }
}

/** Throttling, 5xx and network failures (no HTTP status) are worth another try. */
function transient(e: unknown): boolean {
  const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const name = (e as { name?: string }).name ?? '';
  return !status || status >= 500 || status === 429 || /Throttl|RequestLimitExceeded|SlowDown/.test(name);
}

function toReceived(m: Message): ReceivedMessage {
  return {
    body: m.Body ?? '',
    receiptHandle: m.ReceiptHandle!,
    receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 1),
    messageId: m.MessageId ?? '',
  };
}
