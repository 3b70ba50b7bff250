/**
 * Records every AWS call ct makes, one JSON line each (`{"ct":"fleet worker","client":"SQSClient","command":
 * "SendMessageBatchCommand","input":{...}}`), to the file named by CT_AWS_CALL_LOG (unset: no
 * recording, the default). The IAM policy test replays the lines against
 * ops/docs/fleet-iam-policy.json, so a new call without a policy line is caught. Only the fields
 * that name a resource or carry tags are kept; message bodies, object bodies and parameter
 * values (secrets) are never written.
 */
import { appendFileSync } from 'node:fs';

/** Input fields that name what a call acts on (resource ARNs and IAM condition keys are built from them). */
const KEPT_FIELDS = [
  'QueueUrl',
  'QueueName',
  'QueueNamePrefix',
  'Bucket',
  'Key',
  'IfNoneMatch',
  'Prefix',
  'Delete',
  'Name',
  'Names',
  'Path',
  'Type',
  'InstanceIds',
  'InstanceType',
  'InstanceTypes',
  'ImageId',
  'GroupId',
  'GroupName',
  'SecurityGroupIds',
  'SubnetId',
  'VpcId',
  'TagSpecifications',
  'Tags',
  'Resources',
  'IamInstanceProfile',
  'InstanceProfileName',
  'InstanceMarketOptions',
  'Filters',
];

interface Middlewareable {
  middlewareStack: { add: (mw: (next: (a: { input: object }) => Promise<unknown>, ctx: { clientName?: string; commandName?: string }) => (a: { input: object }) => Promise<unknown>, o: { step: 'initialize'; name: string }) => void };
}

/** Which ct command made the call (`fleet worker`, `run eval`, `cloud cleanup`...): workers are also checked against their role's policy. */
const CT_COMMAND = process.argv.slice(2, 4).join(' ');

/** Adds the recorder to `client` when CT_AWS_CALL_LOG is set, its calls logged as made by `command`; returns the client. */
export function recordCalls<C>(client: C, command: string = CT_COMMAND): C {
  const file = process.env.CT_AWS_CALL_LOG;
  if (!file) return client;
  (client as unknown as Middlewareable).middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as Record<string, unknown>;
      const kept = Object.fromEntries(KEPT_FIELDS.filter((k) => input[k] !== undefined).map((k) => [k, k === 'Delete' ? summariseDelete(input[k]) : input[k]]));
      appendFileSync(file, `${JSON.stringify({ ct: command, client: context.clientName, command: context.commandName, input: kept })}\n`);
      return next(args);
    },
    { step: 'initialize', name: 'ctCallRecorder' },
  );
  return client;
}

/** DeleteObjects' keys (the body is a list of keys, nothing secret). */
function summariseDelete(d: unknown): unknown {
  const objects = (d as { Objects?: Array<{ Key?: string }> })?.Objects ?? [];
  return { Objects: objects.map((o) => ({ Key: o.Key })) };
}
