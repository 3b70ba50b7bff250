/**
 * The fleet id: a hash of everything that changes a run's results, so running the same command
 * again finds the same fleet (its manifest, queues and finished results) and resumes it, while a
 * run that differs in anything that matters starts a fleet of its own.
 */
import { createHash } from 'node:crypto';
import { PROTOCOL_VERSION } from './protocol.js';

/**
 * What a fleet's results depend on. Left out on purpose: how many workers run it
 * (`--max-workers`), whether the prompt was skipped (`--yes`) and where the merged log goes: a
 * run differing only in those is the same fleet and resumes it.
 */
export interface FleetIdInputs {
  /** The code workers run: HEAD's SHA, or the tree SHA of a dirty worktree. */
  codeSha: string;
  policy: { name: string; args: Record<string, string> };
  /** `--protocol` with its thresholds and monitor, when the run has one. */
  protocol?: unknown;
  /** The model the policy calls, when it is not already one of the policy's args. */
  model?: string;
  /** Sample ids (`env:main[:side]`); each runs `epochs` times. Order does not matter. */
  sampleIds: string[];
  epochs: number;
  /** The sandbox kind the workers run samples in (e.g. `docker`, or an external `module:type`). */
  sandbox: string;
  /** EC2 workers' instance type; absent for local and external workers. */
  instanceType?: string;
  /** sha256 of the `--worker-setup` script, when there is one. */
  workerSetupHash?: string;
  /** sha256 over the shipped `--extra-src` trees, when there are any. */
  extraSrcHash?: string;
  /** Settings at the commits workers pull (`name@commit`): other task content is another run. */
  settings?: string[];
  /** Other options that change results (limits, timeouts), as plain JSON values. */
  options?: Record<string, unknown>;
}

/** Hex characters kept: 64 bits, so `lb-fleet-<id>-work` stays far inside SQS's 80 characters. */
export const FLEET_ID_LENGTH = 16;

/** Bumped when the hashed fields change meaning, so an old fleet is never resumed by mistake. */
const SCHEME = 'ct-fleet-id/1';

/** The deterministic id of the fleet these inputs describe (16 hex characters). */
export function fleetId(inputs: FleetIdInputs, protocolVersion: number = PROTOCOL_VERSION): string {
  const normalised = {
    scheme: SCHEME,
    // Another protocol's workers could not run this fleet's messages.
    protocol: protocolVersion,
    ...inputs,
    ...(inputs.settings ? { settings: [...inputs.settings].sort() } : {}),
    // The same samples listed in another order are the same run.
    sampleIds: [...inputs.sampleIds].sort(),
  };
  return createHash('sha256').update(canonicalJson(normalised)).digest('hex').slice(0, FLEET_ID_LENGTH);
}

/** JSON with object keys sorted at every level and undefined members left out. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`cannot hash the number ${value}`);
    return JSON.stringify(value) ?? 'null';
  }
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}
