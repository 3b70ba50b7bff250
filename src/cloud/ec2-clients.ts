/**
 * The EC2-side clients (EC2, EC2 Instance Connect, with SSM and STS): for the EC2 sandbox, EC2
 * fleets and `ct cloud`. Apart from aws-clients.ts because the EC2 SDK alone takes ~0.65 s to
 * load (measured here), which fleets without EC2 workers need not pay.
 */
import { EC2Client } from '@aws-sdk/client-ec2';
import { EC2InstanceConnectClient } from '@aws-sdk/client-ec2-instance-connect';
import { SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import { MAX_ATTEMPTS, STS_OPTIONS } from './aws-clients.js';
import { recordCalls } from './call-recorder.js';

/** The AWS clients ct's cloud code uses, all in one region. */
export interface AwsClients {
  region: string;
  ec2: EC2Client;
  ssm: SSMClient;
  sts: STSClient;
  instanceConnect: EC2InstanceConnectClient;
}

/**
 * Clients for one region. Credentials come from the SDK's standard chain (environment keys, SSO
 * and other profiles, container and instance roles); endpoints from AWS_ENDPOINT_URL*, so the
 * same code talks to AWS or to any API-compatible server without code changes.
 */
export function createAwsClients(region: string): AwsClients {
  const common = { region, maxAttempts: MAX_ATTEMPTS };
  return {
    region,
    ec2: createEc2Client(region),
    ssm: recordCalls(new SSMClient(common)),
    sts: recordCalls(new STSClient({ ...common, ...STS_OPTIONS })),
    instanceConnect: recordCalls(new EC2InstanceConnectClient(common)),
  };
}

/**
 * An EC2 client alone (the fleet's launcher, the exit hook that terminates an instance), made and
 * recorded as every other. `recordAs` names the caller in the call log when the process is not a
 * ct command (default: the command this process runs).
 */
export function createEc2Client(region: string, o: { recordAs?: string } = {}): EC2Client {
  return recordCalls(new EC2Client({ region, maxAttempts: MAX_ATTEMPTS }), o.recordAs);
}

