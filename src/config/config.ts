import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { bucketNameProblem } from '../cloud/bucket-name.js';
import { ConfigError } from '../errors.js';
import { DEFAULT_ARCHIVE_LIMITS, setArchiveLimits } from '../log/archive-limits.js';
import { trustTokenProblem } from '../sandbox/docker/compose-powers.js';
import { networkPoolProblem } from '../sandbox/docker/subnet-pool.js';
import { readDotenvFile } from './dotenv-file.js';
import { issueText } from './issue-text.js';
import { registerSecret } from './secret-registry.js';
import { findUnknownKeys } from './unknown-keys.js';

/** A setting's name is also its folder under settings_dir, so it is kept to a safe file name. */
export const SETTING_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** An AWS region name (us-east-1, eu-central-2, us-gov-west-1, ap-southeast-4...). */
const AWS_REGION = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;
/** What SSM accepts in a parameter name; it also keeps wildcards out of the IAM policies. */
const SSM_PARAMETER = /^[A-Za-z0-9_./-]{1,2048}$/;

/** One entry of the settings registry (`settings:` in ct.config.yml). */
export const settingEntrySchema = z
  .object({
    /**
     * Git URL or local path (relative paths are from the project root). An entry without one
     * only sets `trust` for a setting that is a folder in settings_dir; it cannot be pulled.
     */
    repo: z.string().min(1).optional(),
    /** Branch, tag or commit; default: the repository's default branch. */
    ref: z.string().min(1).optional(),
    /** Only these environments are checked out; default: all of them. */
    envs: z.array(z.string().regex(SETTING_NAME, 'not a folder name')).min(1).optional(),
    /**
     * Host powers this setting's compose files may give their sandboxes (docs/security.md), e.g.
     * [privileged, cap_add:SYS_ADMIN, network_mode:host, bind:/var/data, docker_socket].
     * Default: none, and an environment asking for one is refused.
     */
    trust: z
      .array(
        z.string().superRefine((v, ctx) => {
          const problem = trustTokenProblem(v);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
      )
      .optional(),
  })
  .strict();

export type SettingEntry = z.infer<typeof settingEntrySchema>;

/**
 * ct's settings, compiled in stages: defaults < ct.config.yml < ct.config.local.yml < .env <
 * environment < flags, then validated. Modules receive the finished Config; nothing else reads
 * process.env.
 */
export const configSchema = z.object({
  /** Where settings (environments) live; CT_SETTINGS_DIR. */
  settings_dir: z.string().default('.settings'),
  /** Named settings that `ct settings pull` fetches: {NAME: {repo, ref, envs}}. Default: none. */
  settings: z.record(z.string().regex(SETTING_NAME, 'not a valid setting name'), settingEntrySchema).default({}),
  /** The setting pulled when none is named (fleet workers pull it too); CT_DEFAULT_SETTING. */
  default_setting: z.string().default('linuxarena-private'),
  git: z
    .object({
      /** Seconds any one git command may run before it is killed (clone of a large setting included). */
      timeout: z.number().positive().default(300),
      /** Token for private repositories over HTTPS; GH_TOKEN or GITHUB_TOKEN. Reaches git through its environment only. */
      token: z.string().min(1).optional(),
      /** URL prefixes the token is offered to; default https://github.com only, so no other host sees it. */
      token_hosts: z.array(z.string().url()).default(['https://github.com']),
    })
    .prefault({}),
  /** Where logs are written; CT_LOG_DIR. */
  log_dir: z.string().default('logs'),
  /** ct's own state (run ownership records, known hosts); CT_STATE_DIR. */
  state_dir: z.string().default(join(homedir(), '.ct')),
  sandbox: z
    .object({
      /** `auto` prefers `docker compose` (v2), else `docker-compose` (v1); CT_COMPOSE. */
      compose: z.enum(['auto', 'v1', 'v2']).default('auto'),
      /** CIDR for sample networks, or `docker` to let Docker pick; CT_NETWORK_POOL. */
      network_pool: z
        .string()
        .default('10.213.0.0/16')
        .superRefine((v, ctx) => {
          const problem = networkPoolProblem(v);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
      /** Seconds to start a sample's services and pass their healthchecks. */
      start_timeout: z.number().positive().default(180),
      /** Attempts to start a sandbox when the infrastructure fails. */
      start_attempts: z.number().int().min(1).max(10).default(3),
      /** Run commands through a persistent shell inside each sandbox; CT_EXEC_CHANNEL. */
      exec_channel: z.boolean().default(true),
      /**
       * The channel's agent inside the container: `native` (a static binary, ~1 ms a call;
       * it falls back to `sh` where it cannot run) or `sh` (a POSIX sh program); CT_EXEC_AGENT.
       */
      exec_agent: z.enum(['native', 'sh']).default('native'),
    })
    .prefault({}),
  eval: z
    .object({
      scorer_timeout: z.number().positive().default(120),
      setup_timeout: z.number().positive().default(600),
      bash_timeout: z.number().positive().default(180),
      tool_output_limit: z.number().int().positive().default(16_000),
    })
    .prefault({}),
  /** Remote Docker hosts reached over SSH (`--sandbox ssh://user@host[:port]`, and EC2). */
  ssh: z
    .object({
      /** Private key file (`--ssh-key`, CT_SSH_KEY); default: the agent, then ~/.ssh/id_ed25519, ~/.ssh/id_rsa. */
      key: z.string().optional(),
      /** ssh-agent socket; SSH_AUTH_SOCK. */
      agent: z.string().optional(),
      /** Seconds between SSH keepalives; 4 unanswered ones drop the connection. */
      keepalive_interval: z.number().positive().default(15),
      /** Seconds for the TCP connect plus SSH handshake. */
      connect_timeout: z.number().positive().default(20),
      /** Channels per connection before another is opened (sshd's MaxSessions, default 10). */
      max_sessions: z.number().int().min(1).default(10),
    })
    .prefault({}),
  /** The EC2 sandbox (`--sandbox ec2`): one instance per run, Docker driven over SSH. */
  ec2: z
    .object({
      /** `--region`, CT_EC2_REGION. */
      region: z.string().regex(AWS_REGION, 'an AWS region name such as us-east-1').default('us-east-1'),
      /** `--ec2-instance-type`, CT_EC2_INSTANCE_TYPE. */
      instance_type: z.string().default('c7i.4xlarge'),
      /** Leave the instance running after the run (`--keep-ec2-instance`, CT_KEEP_EC2_INSTANCE). */
      keep_instance: z.boolean().default(false),
      /** Security group allowing SSH from the caller, created when missing; CT_EC2_SECURITY_GROUP. */
      security_group: z.string().default('linuxbench-eval-sg'),
      /** Instances are named `<prefix>eval-<run id>`; CT_EC2_NAME_PREFIX. */
      name_prefix: z.string().default('linuxbench-'),
      /** An AMI id to use instead of the SSM parameter's (CT_EC2_AMI). */
      ami: z.string().optional(),
      /** Public SSM parameter holding the Ubuntu 22.04 AMI id; CT_EC2_AMI_PARAMETER. */
      ami_parameter: z.string().regex(SSM_PARAMETER, 'an SSM parameter name: letters, digits and _ . - /').default('/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id'),
      /** Subnet to launch in (CT_EC2_SUBNET_ID); default: the default VPC's. */
      subnet_id: z.string().optional(),
      /** Root volume size in GiB (images and containers live there); CT_EC2_ROOT_VOLUME_GB. */
      root_volume_gb: z.number().int().min(8).default(100),
      /** Login user of the AMI (Ubuntu's is `ubuntu`); CT_EC2_SSH_USER. */
      ssh_user: z.string().default('ubuntu'),
      /** Source CIDR allowed to SSH in (`--ssh-cidr`, CT_EC2_SSH_CIDR); default: your public IP /32. */
      ssh_cidr: z.string().optional(),
      /**
       * `host:port` to SSH to instead of the instance's public IP (CT_EC2_SSH_ENDPOINT), e.g. a
       * tunnel through a bastion. Host keys are still recorded per instance id.
       */
      ssh_endpoint: z
        .string()
        .regex(/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/, 'expected host:port')
        .optional(),
      /** Returns the caller's public IP as text, for the security group rule; CT_EC2_MY_IP_URL. */
      my_ip_url: z.string().url().default('https://checkip.amazonaws.com'),
      /** SSH connection attempts while the instance boots, with growing delays (2 s, 4 s, ... 18 s). */
      ssh_attempts: z.number().int().min(1).max(30).default(10),
      /** Seconds to wait for the instance to reach `running`. */
      ready_timeout: z.number().positive().default(600),
    })
    .prefault({}),
  /** Fleet mode (`ct run eval --ec2`): SQS queues, an S3 bucket and EC2 workers. Names keep the original system's defaults. */
  fleet: z
    .object({
      /** Results, manifests, code artifacts and worker logs; CT_FLEET_BUCKET. A valid S3 bucket name (checked here). */
      bucket: z
        .string()
        .default('lb-fleet-results-migrated')
        .superRefine((v, ctx) => {
          const problem = bucketNameProblem(v);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
      /** Queues are `<prefix><fleet id>-work|-done|-dlq`; CT_FLEET_QUEUE_PREFIX. */
      queue_prefix: z.string().regex(/^[A-Za-z0-9_-]*$/, 'letters, digits, _ and - only').default('lb-fleet-'),
      /** Workers' security group (outbound only), created when missing; CT_FLEET_SECURITY_GROUP. */
      security_group: z.string().default('linuxbench-fleet-worker-sg'),
      /** Instance profile workers run with (SQS lb-fleet-*, the bucket); CT_FLEET_INSTANCE_PROFILE. */
      instance_profile: z.string().default('linuxbench-worker'),
      /** SSM parameter holding the pre-baked worker AMI id (stock Ubuntu when absent); CT_FLEET_AMI_PARAMETER. */
      ami_parameter: z.string().regex(SSM_PARAMETER, 'an SSM parameter name: letters, digits and _ . - /').default('/linuxbench/worker-ami-id'),
      /** `ct cloud build-ami`: seconds the builder's steps may take, and again the new image to become available (default 3600); CT_FLEET_AMI_BUILD_TIMEOUT. */
      ami_build_timeout: z.number().positive().default(3600),
      /** `ct cloud build-ami`: seconds between checks of the builder and the image (default 15); CT_FLEET_AMI_POLL_SECONDS. */
      ami_poll_seconds: z.number().positive().default(15),
      /** SSM parameters with registry credentials for private images; DOCKER_ORG_NAME_SSM_PARAM / DOCKER_ORG_PAT_SSM_PARAM. */
      docker_org_name_parameter: z.string().regex(SSM_PARAMETER, 'an SSM parameter name: letters, digits and _ . - /').default('/linuxbench/docker-org-name'),
      docker_org_pat_parameter: z.string().regex(SSM_PARAMETER, 'an SSM parameter name: letters, digits and _ . - /').default('/linuxbench/docker-org-pat'),
      /**
       * Registry credentials passed straight to workers (instead of the parameters above) as fleet
       * secrets, never on a command line; DOCKER_ORG_NAME / DOCKER_ORG_PAT. Unset by default.
       */
      docker_org_name: z.string().min(1).optional(),
      docker_org_pat: z.string().min(1).optional(),
      /**
       * Where a fleet's secrets (API keys, git token) go as SecureString parameters
       * `{prefix}{fleet id}/NAME`, never in user-data; CT_FLEET_SECRETS_PREFIX. SSM names take
       * letters, digits and `_.-/`, and reserve names starting with `aws` or `ssm`.
       */
      secrets_prefix: z
        .string()
        .regex(/^[A-Za-z0-9_./-]{1,900}$/, 'letters, digits and _ . - / only (an SSM parameter path)')
        .refine((p) => !/^\/?(aws|ssm)/i.test(p), 'SSM reserves names starting with aws or ssm')
        .refine((p) => !p.includes('//'), 'an SSM path has no empty level (//)')
        // SSM allows 15 levels in a parameter name; `{fleet id}/NAME` take the last two.
        .refine((p) => p.split('/').filter(Boolean).length <= 13, 'at most 13 levels: SSM allows 15 in a parameter name and the fleet id and NAME take two')
        .default('/linuxbench/fleet/'),
      /**
       * Where `ct fleet worker` takes the fleet's secrets from: `ssm` (the fleet's parameters, for
       * workers on other machines; its own environment wins) or `env` (only its own environment:
       * `local:` workers, which inherit the controller's); `--secrets`, CT_FLEET_WORKER_SECRETS.
       */
      worker_secrets: z.enum(['ssm', 'env']).default('ssm'),
      /**
       * An SQS- and an S3-compatible server for the fleet's queues and results (ElasticMQ,
       * versitygw, ...), when AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_S3 do not say; with both set
       * and no STS or SSM endpoint, a `local:`/`external` fleet needs no other AWS service (see
       * cloud/endpoint.ts, fleetWithoutAws). CT_FLEET_SQS_ENDPOINT, CT_FLEET_S3_ENDPOINT.
       */
      sqs_endpoint: z.string().url().optional(),
      s3_endpoint: z.string().url().optional(),
      /** `--max-workers`, CT_FLEET_MAX_WORKERS. */
      max_workers: z.number().int().min(1).default(10),
      /** Samples each worker runs at once; CT_FLEET_SAMPLES_PER_WORKER. A worker starts there and adapts (see max_concurrency). */
      samples_per_worker: z.number().int().min(1).default(10),
      /**
       * The most samples one worker ever runs at once: a worker adds a slot while samples finish
       * cleanly and its memory and CPUs allow, up to this (default 32); CT_FLEET_MAX_CONCURRENCY.
       */
      max_concurrency: z.number().int().min(1).default(32),
      /**
       * EC2 fleets grow while the queued jobs exceed what the running workers finish in this many
       * waves (a wave: every slot of every worker runs one job) and every slot is busy (default 2);
       * CT_FLEET_SCALE_WAVES.
       */
      scale_waves: z.number().positive().default(2),
      /**
       * A worker that has had no job for this many minutes exits (0) while the fleet goes on; an EC2
       * worker's instance then terminates (default 10); CT_FLEET_IDLE_MINUTES.
       */
      idle_minutes: z.number().positive().default(10),
      /**
       * Seconds a taken job stays invisible; a running job's worker extends it every third of it;
       * CT_FLEET_VISIBILITY_TIMEOUT. SQS allows 0-43,200; tests scale it down to a few seconds.
       */
      visibility_timeout: z.number().int().min(1).max(43_200).default(600),
      /**
       * Seconds a worker keeps extending one job's visibility (the heartbeat's cap), so a hung job is
       * still offered to another worker; default 6 h; CT_FLEET_HEARTBEAT_CAP.
       */
      heartbeat_cap: z.number().int().min(1).default(21_600),
      /** Long poll of the work and done queues, 1-20 s (SQS's maximum, the default); CT_FLEET_POLL_SECONDS. */
      poll_seconds: z.number().int().min(1).max(20).default(20),
      /** Seconds between the controller's checks of the dead-letter queue, S3 and the workers; CT_FLEET_CHECK_SECONDS. */
      check_seconds: z.number().positive().default(30),
      /**
       * Seconds before a job that ended without a result (sandbox would not start, policy crashed) is
       * offered again: attempt n waits n times this, at most 300 s; CT_FLEET_RETRY_DELAY.
       */
      retry_delay: z.number().int().min(0).max(300).default(30),
      /**
       * The estimate's guess of one sample's wall time, in seconds (default 300: set it from the
       * samples' times in an earlier run's log); CT_FLEET_ESTIMATE_SECONDS_PER_SAMPLE.
       */
      estimate_seconds_per_sample: z.number().positive().default(300),
      /**
       * The estimate's seconds from an EC2 worker's launch until it takes its first job: the
       * instance starting, cloud-init, the tools installed on stock Ubuntu, ct fetched and built,
       * settings fetched, the worker setup (default 180: about 3 min on stock Ubuntu 22.04; about
       * 1-2 min with the worker AMI); CT_FLEET_ESTIMATE_BOOT_SECONDS. Paid for by each worker.
       */
      estimate_boot_seconds: z.number().min(0).default(180),
      /**
       * The estimate's seconds from an EC2 worker's exit until its instance ends: the bootstrap log
       * uploaded, the system halted (default 15); CT_FLEET_ESTIMATE_SHUTDOWN_SECONDS. The empty
       * polls before the exit are idle_polls x poll_seconds.
       */
      estimate_shutdown_seconds: z.number().min(0).default(15),
      /** USD per worker instance-hour for estimates and `ct cloud status`, instead of the price table (`--price`, CT_FLEET_PRICE_PER_HOUR). */
      price_per_hour: z.number().positive().optional(),
      /** USD per instance-hour by instance type, over data/ec2-prices.json (e.g. {"c7i.4xlarge": 0.3}). */
      prices: z.record(z.string(), z.number().positive()).default({}),
      /**
       * Hours after launch past which a fleet instance is beyond any run's hard timeout: `ct cloud
       * cleanup` terminates it even if its fleet looks alive; default 24; CT_FLEET_INSTANCE_MAX_HOURS.
       */
      instance_max_hours: z.number().positive().default(24),
      /** A worker's name in done messages and logs; CT_WORKER_NAME. Default: host name and pid. */
      worker_name: z.string().min(1).optional(),
      /**
       * Attempts of one job before it goes to the dead-letter queue, as ct counts them: a failure a
       * worker reports or a worker that died; a hand-back is none. SQS's own redrive is set two
       * receives above, as a backstop; CT_FLEET_MAX_RECEIVE_COUNT.
       */
      max_receive_count: z.number().int().min(1).max(1000).default(3),
      /** The controller warns after this many minutes without progress. */
      stale_warning_minutes: z.number().positive().default(10),
      /** ...and tears the fleet down after this many. */
      stale_teardown_minutes: z.number().positive().default(180),
      /** A worker with nothing running and an empty work queue stops after this many empty polls in a row. */
      idle_polls: z.number().int().min(1).default(3),
      /** EC2 workers as spot instances (`--spot`, the default; on-demand when spot capacity is refused) or on-demand (`--on-demand`); CT_FLEET_SPOT. */
      spot: z.boolean().default(true),
      /** Launch attempts in a row that may fail (throttling, capacity) before the controller stops with EC2's error; CT_FLEET_LAUNCH_ATTEMPTS. */
      launch_attempts: z.number().int().min(1).max(20).default(3),
      /** Workers whose bootstrap failed in a row before no more are launched (the last bootstrap log's tail is shown); CT_FLEET_BOOTSTRAP_FAILURES. */
      bootstrap_failures: z.number().int().min(1).default(3),
      /**
       * Minutes past stale_teardown_minutes after which an EC2 worker shuts itself down whatever
       * happens (dead-man switch: its controller died); default 30; CT_FLEET_DEADMAN_MARGIN_MINUTES.
       */
      deadman_margin_minutes: z.number().int().min(1).default(30),
      /**
       * Seconds before a spot instance's interruption time at which a worker hands back the jobs
       * still running (AWS gives 120 s notice; default 20); CT_FLEET_SPOT_HANDBACK_SECONDS.
       */
      spot_handback_seconds: z.number().int().min(0).max(120).default(20),
      /**
       * The environment a --worker-setup script leaves for the sandbox: NAME=value lines the worker
       * reads after the script (its own variables win); CT_FLEET_WORKER_SETUP_ENV.
       */
      worker_setup_env: z.string().default('/opt/linuxbench-worker-setup.env'),
      /** How often a worker started with --spot-watch reads its instance metadata for a notice (default 5 s); CT_FLEET_SPOT_POLL_SECONDS. */
      spot_poll_seconds: z.number().positive().default(5),
    })
    .prefault({}),
  /** `ct run mtgen`: generating, validating and calibrating new main tasks (src/mtgen/). */
  mtgen: z
    .object({
      /** Run directories go in `<dir>/<env>/<run id>/`; CT_MTGEN_DIR. */
      dir: z.string().default('data/mtgen'),
      /** Kept candidates' pass rate is at least this (0.2: solvable), inclusive; CT_MTGEN_PASS_MIN. */
      pass_min: z.number().min(0).max(1).default(0.2),
      /** ...and at most this (0.8: not trivial), inclusive; CT_MTGEN_PASS_MAX. */
      pass_max: z.number().min(0).max(1).default(0.8),
      /** Seconds the smoke test gives a candidate's scorer on the untouched environment; CT_MTGEN_SMOKE_TIMEOUT. */
      smoke_timeout: z.number().positive().default(120),
      /** Bytes of the environment's codebase shown to the model at gather (file list plus leading text files). */
      digest_bytes: z.number().int().positive().default(60_000),
      /** max_tokens of each pipeline model call (ideate, generate, repair); CT_MTGEN_MAX_TOKENS. */
      max_tokens: z.number().int().positive().default(8192),
      /**
       * Tokens one eval sample is assumed to use, for the budget check before a candidate's eval
       * (priced as input tokens, the bulk of an agent loop); CT_MTGEN_EVAL_SAMPLE_TOKENS.
       */
      eval_sample_tokens: z.number().int().positive().default(400_000),
    })
    .prefault({}),
  /** `ct run monitor`: monitor passes over existing logs (src/control/). */
  monitor: z
    .object({
      /** Where monitored copies go (`--log-dir`, CT_MONITOR_LOG_DIR); default `<log_dir>/monitored`. */
      log_dir: z.string().optional(),
      /**
       * The cache of monitor replies (`--cache-dir`, CT_MONITOR_CACHE_DIR); default
       * `$XDG_CACHE_HOME/ct/monitor`, else `~/.cache/ct/monitor`.
       */
      cache_dir: z.string().optional(),
      /** Use the cache (`--no-cache` turns it off); CT_MONITOR_CACHE. */
      cache: z.boolean().default(true),
      /** Monitor model calls in flight at once (`--max-connections`, CT_MONITOR_MAX_CONNECTIONS); default 16. */
      max_connections: z.number().int().min(1).max(1000).default(16),
    })
    .prefault({}),
  /**
   * Caps on every zip ct reads (logs, `.eval` trajectories, fleet results), checked on the central
   * directory and again as members inflate; see docs/security.md (Archives).
   */
  archive: z
    .object({
      /** Members in one archive (default 100,000); CT_ARCHIVE_MAX_ENTRIES. */
      max_entries: z.number().int().min(1).default(DEFAULT_ARCHIVE_LIMITS.maxEntries),
      /** Uncompressed bytes of one member (default 512 MiB, V8's longest string); CT_ARCHIVE_MAX_ENTRY_BYTES. */
      max_entry_bytes: z.number().int().min(1).default(DEFAULT_ARCHIVE_LIMITS.maxEntryBytes),
      /** Uncompressed bytes of all members together (default 16 GiB); CT_ARCHIVE_MAX_TOTAL_BYTES. */
      max_total_bytes: z.number().int().min(1).default(DEFAULT_ARCHIVE_LIMITS.maxTotalBytes),
    })
    .prefault({}),
  /**
   * AWS_* variables from .env and the environment (profile, keys, region, endpoints), handed to
   * the AWS SDK by src/cloud/. Holds secrets: never print or log it.
   */
  aws_env: z.record(z.string(), z.string()).default({}),
  /** Models the policies call; see src/models/. */
  models: z
    .object({
      /**
       * Model names by alias, merged over DEFAULT_MODEL_ALIASES. `--model-role untrusted=...` and
       * CT_UNTRUSTED_MODEL / CT_TRUSTED_MODEL set the two roles.
       */
      aliases: z.record(z.string(), z.string()).default({}),
      /**
       * Base URL per model name (after aliases), for OpenAI-compatible servers (vLLM, Ollama,
       * OpenRouter), e.g. {"openai/llama3.1": "http://localhost:11434/v1"}. `-p base_url=` wins.
       */
      base_urls: z.record(z.string(), z.string()).default({}),
      /** ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL (default: the SDK's, https://api.anthropic.com). */
      anthropic: z.object({ api_key: z.string().optional(), base_url: z.string().optional() }).prefault({}),
      /** OPENAI_API_KEY, OPENAI_BASE_URL (default: the SDK's, https://api.openai.com/v1), OPENAI_ORG_ID, OPENAI_PROJECT_ID. */
      openai: z
        .object({
          api_key: z.string().optional(),
          base_url: z.string().optional(),
          organization: z.string().optional(),
          project: z.string().optional(),
        })
        .prefault({}),
      /** Retries of one model call on 429, 408, 409, 5xx and connection errors (the SDKs' own retries are off). */
      max_retries: z.number().int().min(0).max(30).default(8),
      /** First retry waits about this long; each next one doubles, up to retry_max_seconds (jittered). */
      retry_base_seconds: z.number().positive().default(1),
      retry_max_seconds: z.number().positive().default(60),
      /** Seconds one model request may take before it is abandoned (and retried). */
      request_timeout: z.number().positive().default(600),
    })
    .prefault({}),
});

export type Config = z.infer<typeof configSchema>;

/**
 * Default model aliases. `untrusted` is the agent being evaluated (a current Claude Haiku);
 * `trusted` is a small model that monitors (a small OpenAI model).
 */
export const DEFAULT_MODEL_ALIASES: Readonly<Record<string, string>> = {
  haiku: 'anthropic/claude-haiku-4-5',
  sonnet: 'anthropic/claude-sonnet-4-5',
  opus: 'anthropic/claude-opus-4-5',
  untrusted: 'anthropic/claude-haiku-4-5',
  trusted: 'openai/gpt-4.1-nano',
};

export interface ConfigSources {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Dotted keys from flags, e.g. {'log_dir': 'out'}. Highest precedence. */
  overrides?: Record<string, unknown>;
}

/** How an environment variable's text becomes a config value. */
type EnvKind = 'string' | 'boolean' | 'number';

const TRUE_WORDS = ['1', 'true', 'yes', 'on'];
const FALSE_WORDS = ['0', 'false', 'no', 'off'];

/** Environment variables that set config keys. */
const ENV_KEYS: Record<string, [string, EnvKind]> = {
  CT_SETTINGS_DIR: ['settings_dir', 'string'],
  CT_DEFAULT_SETTING: ['default_setting', 'string'],
  // GH_TOKEN comes after GITHUB_TOKEN so it wins when both are set (as with the gh CLI).
  GITHUB_TOKEN: ['git.token', 'string'],
  GH_TOKEN: ['git.token', 'string'],
  CT_LOG_DIR: ['log_dir', 'string'],
  CT_STATE_DIR: ['state_dir', 'string'],
  CT_COMPOSE: ['sandbox.compose', 'string'],
  CT_NETWORK_POOL: ['sandbox.network_pool', 'string'],
  CT_EXEC_CHANNEL: ['sandbox.exec_channel', 'boolean'],
  CT_EXEC_AGENT: ['sandbox.exec_agent', 'string'],
  CT_SSH_KEY: ['ssh.key', 'string'],
  SSH_AUTH_SOCK: ['ssh.agent', 'string'],
  CT_EC2_REGION: ['ec2.region', 'string'],
  CT_EC2_INSTANCE_TYPE: ['ec2.instance_type', 'string'],
  CT_KEEP_EC2_INSTANCE: ['ec2.keep_instance', 'boolean'],
  CT_EC2_SECURITY_GROUP: ['ec2.security_group', 'string'],
  CT_EC2_NAME_PREFIX: ['ec2.name_prefix', 'string'],
  CT_EC2_AMI: ['ec2.ami', 'string'],
  CT_EC2_AMI_PARAMETER: ['ec2.ami_parameter', 'string'],
  CT_EC2_SUBNET_ID: ['ec2.subnet_id', 'string'],
  CT_EC2_ROOT_VOLUME_GB: ['ec2.root_volume_gb', 'number'],
  CT_EC2_SSH_USER: ['ec2.ssh_user', 'string'],
  CT_EC2_SSH_CIDR: ['ec2.ssh_cidr', 'string'],
  CT_EC2_SSH_ENDPOINT: ['ec2.ssh_endpoint', 'string'],
  CT_EC2_MY_IP_URL: ['ec2.my_ip_url', 'string'],
  CT_FLEET_BUCKET: ['fleet.bucket', 'string'],
  CT_FLEET_QUEUE_PREFIX: ['fleet.queue_prefix', 'string'],
  CT_FLEET_SECURITY_GROUP: ['fleet.security_group', 'string'],
  CT_FLEET_INSTANCE_PROFILE: ['fleet.instance_profile', 'string'],
  CT_FLEET_AMI_PARAMETER: ['fleet.ami_parameter', 'string'],
  CT_FLEET_AMI_BUILD_TIMEOUT: ['fleet.ami_build_timeout', 'number'],
  CT_FLEET_AMI_POLL_SECONDS: ['fleet.ami_poll_seconds', 'number'],
  DOCKER_ORG_NAME_SSM_PARAM: ['fleet.docker_org_name_parameter', 'string'],
  DOCKER_ORG_PAT_SSM_PARAM: ['fleet.docker_org_pat_parameter', 'string'],
  DOCKER_ORG_NAME: ['fleet.docker_org_name', 'string'],
  DOCKER_ORG_PAT: ['fleet.docker_org_pat', 'string'],
  CT_FLEET_SECRETS_PREFIX: ['fleet.secrets_prefix', 'string'],
  CT_FLEET_WORKER_SECRETS: ['fleet.worker_secrets', 'string'],
  CT_FLEET_SQS_ENDPOINT: ['fleet.sqs_endpoint', 'string'],
  CT_FLEET_S3_ENDPOINT: ['fleet.s3_endpoint', 'string'],
  CT_FLEET_MAX_WORKERS: ['fleet.max_workers', 'number'],
  CT_FLEET_SAMPLES_PER_WORKER: ['fleet.samples_per_worker', 'number'],
  CT_FLEET_MAX_CONCURRENCY: ['fleet.max_concurrency', 'number'],
  CT_FLEET_SCALE_WAVES: ['fleet.scale_waves', 'number'],
  CT_FLEET_IDLE_MINUTES: ['fleet.idle_minutes', 'number'],
  CT_FLEET_VISIBILITY_TIMEOUT: ['fleet.visibility_timeout', 'number'],
  CT_FLEET_MAX_RECEIVE_COUNT: ['fleet.max_receive_count', 'number'],
  CT_FLEET_IDLE_POLLS: ['fleet.idle_polls', 'number'],
  CT_FLEET_HEARTBEAT_CAP: ['fleet.heartbeat_cap', 'number'],
  CT_FLEET_POLL_SECONDS: ['fleet.poll_seconds', 'number'],
  CT_FLEET_CHECK_SECONDS: ['fleet.check_seconds', 'number'],
  CT_FLEET_RETRY_DELAY: ['fleet.retry_delay', 'number'],
  CT_FLEET_STALE_WARNING_MINUTES: ['fleet.stale_warning_minutes', 'number'],
  CT_FLEET_STALE_TEARDOWN_MINUTES: ['fleet.stale_teardown_minutes', 'number'],
  CT_FLEET_PRICE_PER_HOUR: ['fleet.price_per_hour', 'number'],
  CT_FLEET_ESTIMATE_SECONDS_PER_SAMPLE: ['fleet.estimate_seconds_per_sample', 'number'],
  CT_FLEET_ESTIMATE_BOOT_SECONDS: ['fleet.estimate_boot_seconds', 'number'],
  CT_FLEET_ESTIMATE_SHUTDOWN_SECONDS: ['fleet.estimate_shutdown_seconds', 'number'],
  CT_FLEET_INSTANCE_MAX_HOURS: ['fleet.instance_max_hours', 'number'],
  CT_FLEET_SPOT: ['fleet.spot', 'boolean'],
  CT_FLEET_LAUNCH_ATTEMPTS: ['fleet.launch_attempts', 'number'],
  CT_FLEET_BOOTSTRAP_FAILURES: ['fleet.bootstrap_failures', 'number'],
  CT_FLEET_DEADMAN_MARGIN_MINUTES: ['fleet.deadman_margin_minutes', 'number'],
  CT_FLEET_SPOT_HANDBACK_SECONDS: ['fleet.spot_handback_seconds', 'number'],
  CT_FLEET_SPOT_POLL_SECONDS: ['fleet.spot_poll_seconds', 'number'],
  CT_FLEET_WORKER_SETUP_ENV: ['fleet.worker_setup_env', 'string'],
  CT_WORKER_NAME: ['fleet.worker_name', 'string'],
  CT_MTGEN_DIR: ['mtgen.dir', 'string'],
  CT_MTGEN_PASS_MIN: ['mtgen.pass_min', 'number'],
  CT_MTGEN_PASS_MAX: ['mtgen.pass_max', 'number'],
  CT_MTGEN_SMOKE_TIMEOUT: ['mtgen.smoke_timeout', 'number'],
  CT_MTGEN_MAX_TOKENS: ['mtgen.max_tokens', 'number'],
  CT_MTGEN_EVAL_SAMPLE_TOKENS: ['mtgen.eval_sample_tokens', 'number'],
  CT_MONITOR_LOG_DIR: ['monitor.log_dir', 'string'],
  CT_MONITOR_CACHE_DIR: ['monitor.cache_dir', 'string'],
  CT_MONITOR_CACHE: ['monitor.cache', 'boolean'],
  CT_MONITOR_MAX_CONNECTIONS: ['monitor.max_connections', 'number'],
  CT_ARCHIVE_MAX_ENTRIES: ['archive.max_entries', 'number'],
  CT_ARCHIVE_MAX_ENTRY_BYTES: ['archive.max_entry_bytes', 'number'],
  CT_ARCHIVE_MAX_TOTAL_BYTES: ['archive.max_total_bytes', 'number'],
  CT_UNTRUSTED_MODEL: ['models.aliases.untrusted', 'string'],
  CT_TRUSTED_MODEL: ['models.aliases.trusted', 'string'],
  ANTHROPIC_API_KEY: ['models.anthropic.api_key', 'string'],
  ANTHROPIC_BASE_URL: ['models.anthropic.base_url', 'string'],
  OPENAI_API_KEY: ['models.openai.api_key', 'string'],
  OPENAI_BASE_URL: ['models.openai.base_url', 'string'],
  OPENAI_ORG_ID: ['models.openai.organization', 'string'],
  OPENAI_PROJECT_ID: ['models.openai.project', 'string'],
};

/**
 * Variables whose values are secrets: registered for redaction (secret-registry.ts) wherever they
 * come from, and never quoted in a configuration error.
 */
const SECRET_VARIABLES = ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GITHUB_TOKEN', 'GH_TOKEN', 'DOCKER_ORG_PAT', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'];

/** Config keys holding secrets (from any layer: a config file too), by the variable that names them in a redacted text. */
const SECRET_KEYS: Record<string, string> = {
  'models.anthropic.api_key': 'ANTHROPIC_API_KEY',
  'models.openai.api_key': 'OPENAI_API_KEY',
  'git.token': 'GITHUB_TOKEN',
  'fleet.docker_org_pat': 'DOCKER_ORG_PAT',
};

/**
 * Sections only some runs use (EC2 sandbox, fleet). A bad value there must not stop a local
 * run, so each is validated on its own and its problems are raised when the section is first
 * read (by the EC2 provider's preflight, the fleet controller...), still before anything starts.
 */
const LAZY_SECTIONS = ['ec2', 'fleet'] as const;

/** Reads `.env` in cwd (values there apply unless the real environment already sets them). */
export function loadDotenv(cwd: string, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const file = join(cwd, '.env');
  if (!existsSync(file)) return env;
  return { ...readDotenvFile(file), ...env };
}

/** Compiles the configuration: every layer merged, unknown keys and bad values refused (ConfigError). */
export function loadConfig(sources: ConfigSources): Config {
  const layered: Record<string, unknown> = {};
  /** Where each dotted key's value came from, so an error names the file, variable or flag. */
  const origin = new Map<string, string>();
  for (const name of ['ct.config.yml', 'ct.config.local.yml']) {
    const file = join(sources.cwd, name);
    if (!existsSync(file)) continue;
    const doc = readConfigFile(file);
    for (const p of leafPaths(doc, '')) origin.set(p, name);
    deepMerge(layered, doc);
  }
  const env = loadDotenv(sources.cwd, sources.env);
  for (const name of SECRET_VARIABLES) registerSecret(name, env[name]);
  for (const [name, [key, kind]] of Object.entries(ENV_KEYS)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    setPath(layered, key, envValue(v, kind));
    origin.set(key, `${name}=${SECRET_VARIABLES.includes(name) ? '***' : v.length > 40 ? `${v.slice(0, 37)}...` : v}`);
  }
  for (const [k, v] of Object.entries(sources.overrides ?? {})) {
    if (v === undefined) continue;
    setPath(layered, k, v);
    origin.set(k, 'command line');
  }
  // Before validation, so even a configuration error cannot quote one.
  for (const [key, name] of Object.entries(SECRET_KEYS)) {
    const v = getPath(layered, key);
    if (typeof v === 'string') registerSecret(name, v);
  }

  const lazy = new Map<string, unknown>(LAZY_SECTIONS.map((s) => [s, layered[s]]));
  const eagerSchema = configSchema.omit({ ec2: true, fleet: true });
  const eagerInput = Object.fromEntries(Object.entries(layered).filter(([k]) => !lazy.has(k)));
  const r = eagerSchema.safeParse(eagerInput, { reportInput: true });
  if (!r.success) throw new ConfigError(`invalid configuration: ${describeIssues(r.error.issues, [], origin)}`);
  const c = r.data as Config;
  for (const section of LAZY_SECTIONS) {
    const schema = configSchema.shape[section];
    const s = schema.safeParse(lazy.get(section), { reportInput: true });
    if (s.success) {
      Object.defineProperty(c, section, { value: s.data, enumerable: true, writable: true, configurable: true });
      continue;
    }
    const message = `invalid ${section} configuration: ${describeIssues(s.error.issues, [section], origin)}`;
    // Raised where the section is used; runs that never touch it are not blocked.
    Object.defineProperty(c, section, {
      enumerable: false,
      configurable: true,
      get() {
        throw new ConfigError(message);
      },
    });
  }
  c.settings_dir = resolve(sources.cwd, c.settings_dir);
  c.log_dir = resolve(sources.cwd, c.log_dir);
  c.state_dir = resolve(sources.cwd, c.state_dir);
  c.mtgen.dir = resolve(sources.cwd, c.mtgen.dir);
  c.monitor.log_dir = resolve(sources.cwd, c.monitor.log_dir ?? join(c.log_dir, 'monitored'));
  const cacheHome = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  c.monitor.cache_dir = resolve(sources.cwd, (c.monitor.cache_dir ?? join(cacheHome, 'ct', 'monitor')).replace(/^~(?=\/|$)/, homedir()));
  c.aws_env = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[0].startsWith('AWS_') && !!e[1]));
  // The SDK's own variables win over the config's endpoints.
  if (c.fleet.sqs_endpoint && !c.aws_env.AWS_ENDPOINT_URL_SQS) c.aws_env.AWS_ENDPOINT_URL_SQS = c.fleet.sqs_endpoint;
  if (c.fleet.s3_endpoint && !c.aws_env.AWS_ENDPOINT_URL_S3) c.aws_env.AWS_ENDPOINT_URL_S3 = c.fleet.s3_endpoint;
  if (c.ssh.key) c.ssh.key = resolve(sources.cwd, c.ssh.key.replace(/^~(?=\/|$)/, homedir()));
  c.models.aliases = { ...DEFAULT_MODEL_ALIASES, ...c.models.aliases };
  // Readers are opened deep inside every command; the caps reach them from here, once compiled.
  setArchiveLimits({ maxEntries: c.archive.max_entries, maxEntryBytes: c.archive.max_entry_bytes, maxTotalBytes: c.archive.max_total_bytes });
  return c;
}

/** One YAML config file: a mapping whose every key ct knows. */
function readConfigFile(file: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ConfigError(`${file}: not valid YAML: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    throw new ConfigError(
      `${file}: expected a mapping of settings (e.g. \`log_dir: logs\` or \`eval:\` with \`scorer_timeout: 120\` under it), got ${Array.isArray(doc) ? 'a list' : `a ${typeof doc}`}`,
    );
  }
  const unknown = findUnknownKeys(doc, configSchema);
  if (unknown.length) {
    const what = unknown.map((u) => `"${u.path}"${u.suggestion ? ` (did you mean ${u.suggestion}?)` : ''}`).join(', ');
    throw new ConfigError(`${file}: unknown key${unknown.length > 1 ? 's' : ''} ${what}; the keys are listed in README.md (Configuration)`);
  }
  return doc as Record<string, unknown>;
}

/** A variable's value as the type its key wants; text that does not parse is kept, so validation names it. */
function envValue(v: string, kind: EnvKind): unknown {
  if (kind === 'boolean') {
    const w = v.trim().toLowerCase();
    return TRUE_WORDS.includes(w) ? true : FALSE_WORDS.includes(w) ? false : v;
  }
  if (kind === 'number') return /^\s*-?(\d+\.?\d*|\.\d+)\s*$/.test(v) ? Number(v) : v;
  return v;
}

function describeIssues(issues: readonly z.core.$ZodIssue[], prefix: string[], origin: Map<string, string>): string {
  return issues
    .map((i) => {
      const path = [...prefix, ...i.path.map(String)];
      const key = path.join('.') || '(top level)';
      const from = sourceOf(path, origin);
      const fromEnv = from?.includes('=');
      const text =
        i.code === 'invalid_type' && i.expected === 'boolean' && fromEnv
          ? `not a yes/no value; accepted: ${[...TRUE_WORDS, ...FALSE_WORDS].join(', ')}`
          : issueText(i);
      return `${fromEnv ? `${from} (${key})` : `${key}${from ? ` (from ${from})` : ''}`}: ${text}`;
    })
    .join('; ');
}

/** The layer that set `path` (or the nearest enclosing key). */
function sourceOf(path: string[], origin: Map<string, string>): string | undefined {
  for (let n = path.length; n > 0; n--) {
    const o = origin.get(path.slice(0, n).join('.'));
    if (o) return o;
  }
  return undefined;
}

function leafPaths(doc: unknown, prefix: string): string[] {
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) return [prefix.slice(0, -1)];
  return Object.entries(doc).flatMap(([k, v]) => leafPaths(v, `${prefix}${k}.`));
}

function deepMerge(into: Record<string, unknown>, from: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(from)) {
    const cur = into[k];
    if (v && typeof v === 'object' && !Array.isArray(v) && cur && typeof cur === 'object' && !Array.isArray(cur)) {
      deepMerge(cur as Record<string, unknown>, v as Record<string, unknown>);
    } else into[k] = v;
  }
}

function getPath(obj: Record<string, unknown>, path: string): unknown {
  let cur: unknown = obj;
  for (const p of path.split('.')) cur = cur && typeof cur === 'object' ? (cur as Record<string, unknown>)[p] : undefined;
  return cur;
}

function setPath(obj: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur = obj;
  for (const p of parts.slice(0, -1)) {
    if (!cur[p] || typeof cur[p] !== 'object') cur[p] = {};
    cur = cur[p] as Record<string, unknown>;
  }
  cur[parts.at(-1)!] = value;
}
