/**
 * `ct cloud build-ami`: bakes a worker AMI. The controller
 *
 *   1. reads the previous AMI (SSM fleet.ami_parameter) and the image digests on its tags;
 *   2. launches a builder instance (stock Ubuntu 22.04 with --fresh or without a previous AMI, else
 *      the previous AMI, so unchanged images are already on its disk), tagged ct:role=ami-builder,
 *      in the workers' egress-only security group, shutdown behaviour `stop`;
 *   3. waits for the builder's marker object, printing each step of its log as it completes;
 *   4. images the stopped builder (CreateImage, the digests as tags), waits until it is available,
 *      stores its id in SSM, deregisters the previous AMI and deletes its snapshots;
 *   5. terminates the builder, always: in `finally`, and on exit or Ctrl-C (terminate-on-exit.ts).
 */
import {
  CreateImageCommand,
  DeleteSnapshotCommand,
  DeregisterImageCommand,
  DescribeImagesCommand,
  RunInstancesCommand,
  type EC2Client,
  type Image,
} from '@aws-sdk/client-ec2';
import { CreateBucketCommand, GetObjectCommand, HeadBucketCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { GetParameterCommand, PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CloudError, awsErrorName, cloudError } from '../errors.js';
import { sleep } from '../host/backoff.js';
import { amiBuildPrefix, renderAmiBuilderUserData } from './ami-builder-user-data.js';
import { checkInstanceType, describeInstance, resolveAmi, terminateInstance } from './ec2-instance.js';
import { ensureEgressOnlySecurityGroup } from './security-group.js';
import { MANAGED_BY, TAGS, tagValue, toTags } from './tags.js';
import { terminateOnExit } from './terminate-on-exit.js';
import { INSTANCE_METADATA_OPTIONS } from './instance-metadata.js';

/** Tag prefix of an image digest on a worker AMI: `ct:image:<image ref>` = `sha256:...`. */
export const DIGEST_TAG_PREFIX = 'ct:image:';
/** EC2 allows 50 tags per resource; the others (Name, ManagedBy, ...) take a few. */
const MAX_DIGEST_TAGS = 44;
/** How long a failed builder is given to power itself off before it is terminated. */
const POWER_OFF_GRACE_MS = 30_000;
/** Lines of a failed build's log shown to the user. */
const LOG_TAIL_LINES = 25;

export interface BuildAmiOptions {
  ec2: EC2Client;
  s3: S3Client;
  ssm: SSMClient;
  region: string;
  bucket: string;
  /** fleet.ami_parameter: where the AMI id is stored. */
  amiParameter: string;
  /** Stock Ubuntu: ec2.ami, else ec2.ami_parameter. */
  ubuntuAmi?: string;
  ubuntuParameter: string;
  instanceType: string;
  instanceProfile: string;
  securityGroup: string;
  subnetId?: string;
  rootVolumeGb: number;
  namePrefix: string;
  launchedBy: string;
  fresh: boolean;
  images: string[];
  /** ct's package.json and package-lock.json are read from here. */
  codeDir: string;
  dockerNameParameter: string;
  dockerPatParameter: string;
  /** fleet.ami_build_timeout (s): the builder's steps, and again the image becoming available. */
  timeoutSeconds: number;
  /** fleet.ami_poll_seconds: between checks of the builder and the image. */
  pollSeconds: number;
  note: (line: string) => void;
}

export interface BuildAmiResult {
  imageId: string;
  builderId: string;
  previousImageId?: string;
  pulled: string[];
  skipped: string[];
  deletedSnapshots: string[];
}

/** Builds the AMI; throws a CloudError carrying the builder log's tail when the build fails. */
export async function buildAmi(o: BuildAmiOptions): Promise<BuildAmiResult> {
  const started = Date.now();
  const phase = (name: string, since: number) => o.note(`${name} in ${Math.round((Date.now() - since) / 1000)}s`);
  // Bad input ends here, before anything is created: an unknown type, user-data over 16 KB.
  await checkInstanceType(o.ec2, o.instanceType, o.region);
  const previous = await previousAmi(o);
  const previousDigests = o.fresh || !previous ? {} : digestsOf(previous);
  const baseImage = !o.fresh && previous ? previous.ImageId! : await resolveAmi(o.ssm, { ...(o.ubuntuAmi ? { ami: o.ubuntuAmi } : {}), parameter: o.ubuntuParameter });
  const buildId = `${new Date().toISOString().slice(0, 10).replace(/-/g, '')}-${randomBytes(4).toString('hex')}`;
  const prefix = amiBuildPrefix(buildId);
  const userData = renderAmiBuilderUserData({
    buildId,
    region: o.region,
    bucket: o.bucket,
    images: o.images,
    previousDigests,
    dockerNameParameter: o.dockerNameParameter,
    dockerPatParameter: o.dockerPatParameter,
  });
  o.note(
    `build ${buildId}: ${o.images.length} environment image(s); from ${!o.fresh && previous ? `the previous AMI ${baseImage} (unchanged images are not pulled)` : `stock Ubuntu ${baseImage}${o.fresh ? ' (--fresh)' : ''}`}`,
  );
  await ensureBucket(o.s3, o.bucket);
  for (const f of ['package.json', 'package-lock.json']) {
    await o.s3.send(new PutObjectCommand({ Bucket: o.bucket, Key: `${prefix}${f}`, Body: readFileSync(join(o.codeDir, f)), ServerSideEncryption: 'AES256' }));
  }
  const groupId = await ensureEgressOnlySecurityGroup(o.ec2, { name: o.securityGroup, ...(o.subnetId ? { subnetId: o.subnetId } : {}) });

  const tags = toTags({
    [TAGS.name]: `${o.namePrefix}ami-builder-${buildId}`,
    [TAGS.launchedBy]: o.launchedBy,
    [TAGS.managedBy]: MANAGED_BY,
    [TAGS.role]: 'ami-builder',
  });
  let builderId: string | undefined;
  let disarm = () => {};
  // Ctrl-C: exit, so the exit handler terminates the builder (a second Ctrl-C is the same).
  const onSignal = () => process.exit(130);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const launched = await o.ec2
      .send(
        new RunInstancesCommand({
          ImageId: baseImage,
          InstanceType: o.instanceType as never,
          MinCount: 1,
          MaxCount: 1,
          SecurityGroupIds: [groupId],
          ...(o.subnetId ? { SubnetId: o.subnetId } : {}),
          IamInstanceProfile: { Name: o.instanceProfile },
          // `stop`: the builder powers off when done and its stopped disk is imaged.
          InstanceInitiatedShutdownBehavior: 'stop',
          MetadataOptions: INSTANCE_METADATA_OPTIONS,
          UserData: Buffer.from(userData).toString('base64'),
          BlockDeviceMappings: [{ DeviceName: '/dev/sda1', Ebs: { VolumeSize: o.rootVolumeGb, VolumeType: 'gp3', DeleteOnTermination: true } }],
          TagSpecifications: [
            { ResourceType: 'instance', Tags: tags },
            { ResourceType: 'volume', Tags: tags },
          ],
        }),
      )
      .catch((e) => {
        throw cloudError(e, `launching the AMI builder (${o.instanceType})`);
      });
    builderId = launched.Instances?.[0]?.InstanceId;
    if (!builderId) throw new CloudError('RunInstances returned no instance for the AMI builder', true);
    disarm = terminateOnExit(builderId, o.region);
    o.note(`builder ${builderId} launched (${o.instanceType}); log: s3://${o.bucket}/${prefix}build.log`);

    const buildStart = Date.now();
    const outcome = await waitForBuilder(o, builderId, prefix);
    if (outcome !== 'done') {
      // A failed builder powers itself off right after its marker: let it (briefly), so the
      // terminate below follows its power-off instead of racing it.
      if (outcome === 'failed') await waitForPowerOff(o, builderId, POWER_OFF_GRACE_MS);
      const tail = await logTail(o.s3, o.bucket, `${prefix}build.log`);
      throw new CloudError(`the AMI build failed (${outcome}); the builder's log s3://${o.bucket}/${prefix}build.log ends:\n${tail}`, false);
    }
    phase('builder finished', buildStart);
    const digestLines = (await readObject(o.s3, o.bucket, `${prefix}digests.txt`)) ?? '';
    const digests = Object.fromEntries(
      digestLines
        .split('\n')
        .map((l) => l.trim().split(/\s+/))
        .filter((p) => p.length === 2 && p[1])
        .map((p) => [p[0]!, p[1]!]),
    );
    const skipped = o.images.filter((i) => previousDigests[i] && previousDigests[i] === digests[i]);
    const pulled = o.images.filter((i) => !skipped.includes(i));
    o.note(`images: ${pulled.length} pulled, ${skipped.length} unchanged`);

    const stopStart = Date.now();
    await waitForStopped(o, builderId);
    phase('builder powered off', stopStart);
    const imageStart = Date.now();
    const digestTags = Object.entries(digests)
      .filter(([img]) => `${DIGEST_TAG_PREFIX}${img}`.length <= 127)
      .slice(0, MAX_DIGEST_TAGS)
      .map(([img, d]) => ({ Key: `${DIGEST_TAG_PREFIX}${img}`, Value: d }));
    const created = await o.ec2
      .send(
        new CreateImageCommand({
          InstanceId: builderId,
          Name: `${o.namePrefix}worker-${buildId}`,
          Description: `ct worker AMI (build ${buildId}): Docker, Node 20, npm cache, ${o.images.length} environment image(s)`,
          TagSpecifications: [
            {
              ResourceType: 'image',
              Tags: [
                ...toTags({ [TAGS.name]: `${o.namePrefix}worker-${buildId}`, [TAGS.launchedBy]: o.launchedBy, [TAGS.managedBy]: MANAGED_BY, [TAGS.role]: 'worker-ami' }),
                ...digestTags,
              ],
            },
          ],
        }),
      )
      .catch((e) => {
        throw cloudError(e, `creating the image of ${builderId}`);
      });
    const imageId = created.ImageId!;
    await waitForImage(o, imageId);
    phase(`image ${imageId} available`, imageStart);
    await o.ssm.send(new PutParameterCommand({ Name: o.amiParameter, Value: imageId, Type: 'String', Overwrite: true })).catch((e) => {
      throw cloudError(e, `storing ${imageId} in SSM ${o.amiParameter}`);
    });
    o.note(`stored ${imageId} in SSM ${o.amiParameter}`);
    const deletedSnapshots = previous && previous.ImageId !== imageId ? await removeImage(o, previous) : [];
    phase('AMI build complete', started);
    return { imageId, builderId, ...(previous ? { previousImageId: previous.ImageId! } : {}), pulled, skipped, deletedSnapshots };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (builderId) {
      try {
        await terminateInstance(o.ec2, builderId);
        o.note(`builder ${builderId} terminated`);
        disarm();
      } catch (e) {
        // Left armed: the exit handler tries once more.
        o.note(`could not terminate the builder ${builderId} (${(e as Error).message}); run \`ct cloud cleanup --yes\``);
      }
    }
  }
}

/** The AMI the parameter names now, if it exists (a dangling id is no previous AMI). */
async function previousAmi(o: BuildAmiOptions): Promise<Image | undefined> {
  let id: string | undefined;
  try {
    id = (await o.ssm.send(new GetParameterCommand({ Name: o.amiParameter }))).Parameter?.Value;
  } catch (e) {
    if (awsErrorName(e) !== 'ParameterNotFound') throw cloudError(e, `reading the worker AMI id from SSM ${o.amiParameter}`);
  }
  if (!id) return undefined;
  try {
    const r = await o.ec2.send(new DescribeImagesCommand({ ImageIds: [id] }));
    return r.Images?.[0];
  } catch (e) {
    if (/InvalidAMIID/.test(awsErrorName(e))) return undefined;
    throw cloudError(e, `describing the previous worker AMI ${id}`);
  }
}

function digestsOf(image: Image): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of image.Tags ?? []) if (t.Key?.startsWith(DIGEST_TAG_PREFIX) && t.Value) out[t.Key.slice(DIGEST_TAG_PREFIX.length)] = t.Value;
  return out;
}

/** `done`, `failed` (a step failed), `stopped without a marker`, `terminated` or `timed out`. */
async function waitForBuilder(o: BuildAmiOptions, builderId: string, prefix: string): Promise<string> {
  const deadline = Date.now() + o.timeoutSeconds * 1000;
  let shown = 0;
  for (;;) {
    const log = (await readObject(o.s3, o.bucket, `${prefix}build.log`)) ?? '';
    const steps = log.split('\n').filter((l) => /step \S+: (ok in|FAILED)/.test(l));
    for (const l of steps.slice(shown)) o.note(l.replace(/^\S+ /, ''));
    shown = steps.length;
    for (const marker of ['done', 'failed']) if ((await readObject(o.s3, o.bucket, `${prefix}${marker}`)) !== undefined) return marker;
    const state = (await describeInstance(o.ec2, builderId))?.State?.Name;
    if (state === 'terminated' || state === 'shutting-down') return 'the builder was terminated';
    if (Date.now() > deadline) return `no result after ${o.timeoutSeconds}s (fleet.ami_build_timeout)`;
    await sleep(o.pollSeconds * 1000);
  }
}

/** Waits until the builder is stopped or going away, at most `limitMs`; never throws. */
async function waitForPowerOff(o: BuildAmiOptions, builderId: string, limitMs: number): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    const state = (await describeInstance(o.ec2, builderId).catch(() => undefined))?.State?.Name;
    if (state === undefined || state === 'stopped' || state === 'terminated' || state === 'shutting-down') return;
    await sleep(o.pollSeconds * 1000);
  }
}

/** Waits until the builder powered itself off (its marker is written just before; no stop call, so the policy needs none). */
async function waitForStopped(o: BuildAmiOptions, builderId: string): Promise<void> {
  const deadline = Date.now() + o.timeoutSeconds * 1000;
  for (;;) {
    const state = (await describeInstance(o.ec2, builderId))?.State?.Name;
    if (state === 'stopped') return;
    if (state === 'terminated' || state === 'shutting-down') throw new CloudError(`the builder ${builderId} was terminated before it could be imaged`, false);
    if (Date.now() > deadline) throw new CloudError(`the builder ${builderId} did not power off within ${o.timeoutSeconds}s of finishing (fleet.ami_build_timeout)`, true);
    await sleep(o.pollSeconds * 1000);
  }
}

async function waitForImage(o: BuildAmiOptions, imageId: string): Promise<void> {
  const deadline = Date.now() + o.timeoutSeconds * 1000;
  for (;;) {
    const image = (await o.ec2.send(new DescribeImagesCommand({ ImageIds: [imageId] }))).Images?.[0];
    if (image?.State === 'available') return;
    if (image?.State === 'failed' || image?.State === 'error') throw new CloudError(`the image ${imageId} failed: ${image.StateReason?.Message ?? 'no reason given'}`, false);
    if (Date.now() > deadline) throw new CloudError(`the image ${imageId} was not available within ${o.timeoutSeconds}s`, true);
    await sleep(o.pollSeconds * 1000);
  }
}

/** Deregisters a previous ct worker AMI and deletes its snapshots (only one AMI is kept). */
async function removeImage(o: BuildAmiOptions, image: Image): Promise<string[]> {
  if (tagValue(image.Tags, TAGS.managedBy) !== MANAGED_BY) {
    o.note(`previous AMI ${image.ImageId} was not made by ct: kept`);
    return [];
  }
  const snapshots = (image.BlockDeviceMappings ?? []).map((m) => m.Ebs?.SnapshotId).filter((s): s is string => Boolean(s));
  try {
    await o.ec2.send(new DeregisterImageCommand({ ImageId: image.ImageId! }));
    for (const s of snapshots) await o.ec2.send(new DeleteSnapshotCommand({ SnapshotId: s }));
  } catch (e) {
    o.note(`could not remove the previous AMI ${image.ImageId} (${(e as Error).message}); remove it in the EC2 console`);
    return [];
  }
  o.note(`deregistered the previous AMI ${image.ImageId}${snapshots.length ? ` and deleted snapshot(s) ${snapshots.join(', ')}` : ''}`);
  return snapshots;
}

async function ensureBucket(s3: S3Client, bucket: string): Promise<void> {
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch (e) {
    if (!/NotFound|NoSuchBucket|404/.test(awsErrorName(e))) throw cloudError(e, `checking bucket ${bucket}`);
    await s3.send(new CreateBucketCommand({ Bucket: bucket })).catch((e2) => {
      if (!/BucketAlreadyOwnedByYou/.test(awsErrorName(e2))) throw cloudError(e2, `creating bucket ${bucket}`);
    });
  }
}

async function readObject(s3: S3Client, bucket: string, key: string): Promise<string | undefined> {
  try {
    const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    return await r.Body!.transformToString();
  } catch (e) {
    if (/NoSuchKey|NotFound/.test(awsErrorName(e))) return undefined;
    throw cloudError(e, `reading s3://${bucket}/${key}`);
  }
}

async function logTail(s3: S3Client, bucket: string, key: string): Promise<string> {
  const text = await readObject(s3, bucket, key).catch(() => undefined);
  if (!text) return '  (no log was uploaded)';
  return text
    .trimEnd()
    .split('\n')
    .slice(-LOG_TAIL_LINES)
    .map((l) => `  ${l}`)
    .join('\n');
}
