/**
 * What EC2 workers are launched from, decided before anything is created: the instance type's
 * size (and so each worker's concurrency) and the AMI (the worker AMI from SSM when its parameter
 * exists, stock Ubuntu 22.04 otherwise). Read-only calls only.
 */
import type { EC2Client } from '@aws-sdk/client-ec2';
import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { awsErrorName, cloudError } from '../errors.js';
import { checkInstanceType, resolveAmi } from '../cloud/ec2-instance.js';

export interface InstanceSize {
  vcpus: number;
  memoryGiB: number;
}

/**
 * Samples a worker runs at once on an instance of this size: one per 1.5 vCPU and per 3 GiB,
 * whichever allows fewer, at least 1 (c7i.4xlarge, 16 vCPU / 32 GiB: 10, the spec's default).
 */
export function concurrencyFor(size: InstanceSize): number {
  return Math.max(1, Math.min(Math.floor(size.vcpus / 1.5), Math.floor(size.memoryGiB / 3)));
}

/** vCPUs and memory of an instance type; an unknown type is a ConfigError (exit 2, nothing created). */
export async function instanceSize(ec2: EC2Client, instanceType: string): Promise<InstanceSize> {
  return checkInstanceType(ec2, instanceType);
}

export interface WorkerImage {
  imageId: string;
  /** `worker-ami`: Docker, Node and the npm cache are baked in; `ubuntu`: installed at boot. */
  kind: 'worker-ami' | 'ubuntu';
}

/** The worker AMI named by `workerParameter`, else stock Ubuntu (`ami`, or the public parameter). */
export async function workerImage(ssm: SSMClient, o: { workerParameter: string; ami?: string; ubuntuParameter: string }): Promise<WorkerImage> {
  try {
    const r = await ssm.send(new GetParameterCommand({ Name: o.workerParameter }));
    if (r.Parameter?.Value) return { imageId: r.Parameter.Value, kind: 'worker-ami' };
  } catch (e) {
    if (awsErrorName(e) !== 'ParameterNotFound') throw cloudError(e, `reading the worker AMI id from SSM ${o.workerParameter}`);
  }
  return { imageId: await resolveAmi(ssm, { ...(o.ami ? { ami: o.ami } : {}), parameter: o.ubuntuParameter }), kind: 'ubuntu' };
}
