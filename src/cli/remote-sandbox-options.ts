import type { Command } from 'commander';

/** Flags of the remote sandboxes (`--sandbox ssh://...`, `--sandbox ec2`). */
export interface RemoteSandboxFlags {
  sshKey?: string;
  keepEc2Instance?: boolean;
  ec2InstanceType?: string;
  region?: string;
  sshCidr?: string;
}

export const SANDBOX_KINDS_HELP =
  'where samples run: docker (this machine), local (a temp dir on this machine, NOT isolated: commands run as you; ' +
  'the built-in test policy only, unless --unsafe-local), ssh://user@host[:port] (Docker on that host), ec2 (a fresh EC2 instance), ' +
  'or path/or/pkg:ExportName (your own provider)';

/** Adds the remote-sandbox flags; `forRun` adds those that only matter when launching. */
export function addRemoteSandboxOptions(cmd: Command, forRun: boolean): Command {
  cmd.option('--ssh-key <file>', 'for ssh://: private key to log in with (default: ssh-agent, then ~/.ssh/id_ed25519, ~/.ssh/id_rsa)');
  cmd.option('--region <region>', 'for ec2: AWS region (default us-east-1)');
  if (forRun) {
    cmd.option('--ec2-instance-type <type>', 'for ec2: instance type (default c7i.4xlarge)');
    cmd.option('--keep-ec2-instance', 'for ec2: leave the instance running after the run (prints how to connect and terminate)');
    cmd.option('--ssh-cidr <cidr>', 'for ec2: source range allowed to SSH in (default: your public IP /32)');
  }
  return cmd;
}

/** Each flag sets one config key. */
export function remoteSandboxOverrides(flags: RemoteSandboxFlags): Record<string, unknown> {
  return {
    'ssh.key': flags.sshKey,
    'ec2.region': flags.region,
    'ec2.instance_type': flags.ec2InstanceType,
    'ec2.keep_instance': flags.keepEc2Instance,
    'ec2.ssh_cidr': flags.sshCidr,
  };
}

export const REMOTE_SANDBOX_EXAMPLES =
  '  ct run eval -e notes_app -t fix_config --sandbox ssh://ubuntu@build-box.internal\n' +
  '  ct run eval --task-file demo --sandbox ec2 --ec2-instance-type c7i.8xlarge --max-samples 12\n' +
  '  ct run eval -e notes_app -t fix_config --sandbox ec2 --keep-ec2-instance\n';

export const REMOTE_SANDBOX_NOTES =
  '\nRemote sandboxes:\n' +
  '  ssh://user@host[:port]  runs compose on that host over one SSH connection; the host needs Docker and\n' +
  '                          Compose. Host keys are trusted on first use and recorded in <state_dir>/known_hosts.\n' +
  '  ec2                     launches one Ubuntu 22.04 instance for the run (AWS credentials: AWS_PROFILE for\n' +
  '                          SSO, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; not both), installs Docker, runs\n' +
  '                          every sample there and terminates it at the end. Settings: the ec2 section of\n' +
  '                          ct.config.yml or CT_EC2_* variables (security group, name prefix, AMI, subnet,\n' +
  '                          CT_EC2_SSH_ENDPOINT=host:port to SSH through a tunnel).\n';
