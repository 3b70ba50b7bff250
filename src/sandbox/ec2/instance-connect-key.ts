import { SendSSHPublicKeyCommand, type EC2InstanceConnectClient } from '@aws-sdk/client-ec2-instance-connect';
import ssh2 from 'ssh2';
import { ConfigError } from '../../errors.js';

/** EC2 Instance Connect accepts a pushed key for 60 s; re-push when the last push is older than this. */
const REPUSH_AFTER_MS = 40_000;

/**
 * A throwaway ed25519 key pair for one instance, made usable by EC2 Instance Connect: the
 * public half is pushed (SendSSHPublicKey) right before each new SSH connection and is
 * accepted for 60 s, so no long-lived key is ever installed on the instance or kept on disk.
 * An established connection stays up after the key expires; only new logins need a push.
 */
export class InstanceConnectKey {
  readonly privateKey: string;
  readonly publicKey: string;
  private pushedAt = 0;

  constructor(
    private readonly client: EC2InstanceConnectClient,
    readonly instanceId: string,
    readonly osUser: string,
  ) {
    const pair = ssh2.utils.generateKeyPairSync('ed25519', { comment: `ct-${instanceId}` });
    this.privateKey = pair.private;
    this.publicKey = pair.public;
  }

  /** Pushes the public key unless a push from the last 40 s is still valid. */
  async ensurePushed(): Promise<void> {
    if (Date.now() - this.pushedAt < REPUSH_AFTER_MS) return;
    await this.push();
  }

  /** Forgets the last push (e.g. a login was refused: the key may not have reached the instance). */
  invalidate(): void {
    this.pushedAt = 0;
  }

  private async push(): Promise<void> {
    try {
      const r = await this.client.send(
        new SendSSHPublicKeyCommand({ InstanceId: this.instanceId, InstanceOSUser: this.osUser, SSHPublicKey: this.publicKey }),
      );
      if (r.Success === false) throw new Error('the service answered Success=false');
      this.pushedAt = Date.now();
    } catch (e) {
      const name = (e as { name?: string }).name ?? '';
      if (/AccessDenied|Unauthorized/.test(name)) {
        throw new ConfigError(
          `your AWS identity may not push SSH keys with EC2 Instance Connect (ec2-instance-connect:SendSSHPublicKey): ${(e as Error).message}`,
        );
      }
      throw new Error(`EC2 Instance Connect did not take the key for ${this.instanceId}: ${name ? `${name}: ` : ''}${(e as Error).message}`);
    }
  }
}
