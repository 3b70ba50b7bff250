/**
 * How every instance ct launches answers its metadata service (IMDS): session tokens only
 * (IMDSv2), and a PUT response hop limit of 1, so the token that unlocks the instance role's
 * credentials never reaches a container behind Docker's bridge (one more hop). The worker
 * bootstrap also drops container traffic to the metadata address (`user-data.ts`).
 */
import type { InstanceMetadataOptionsRequest } from '@aws-sdk/client-ec2';

export const INSTANCE_METADATA_OPTIONS: InstanceMetadataOptionsRequest = {
  HttpTokens: 'required',
  HttpPutResponseHopLimit: 1,
  HttpEndpoint: 'enabled',
};
