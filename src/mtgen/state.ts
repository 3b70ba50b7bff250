import { existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, errorMessage } from '../errors.js';
import { processAlive } from '../host/process-alive.js';
import { stateSchema, type MtgenState, type UsageRow, type UsageStage } from './types.js';

export const STATE_FILE = 'state.json';
/** Holds the pid of the process working on the run; a dead pid's lock is stale and taken over. */
export const LOCK_FILE = 'run.lock';

/**
 * The run's state.json. Every change is written whole to a temporary file and renamed over the
 * old one (rename is atomic on one filesystem), so a crash at any moment leaves either the old
 * state or the new, never half of one.
 */
export class RunState {
  private constructor(
    readonly dir: string,
    readonly data: MtgenState,
  ) {}

  /** A new run's state, written at once. */
  static create(dir: string, data: MtgenState): RunState {
    const s = new RunState(dir, data);
    s.save();
    return s;
  }

  /** Reads a run directory's state; a missing, unreadable or invalid state is a ConfigError (nothing is changed). */
  static load(dir: string): RunState {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) {
      throw new ConfigError(`run directory ${dir} does not exist; start a run with \`ct run mtgen run-all -e ENV -s SIDE_TASK\``);
    }
    const file = join(dir, STATE_FILE);
    if (!existsSync(file)) {
      throw new ConfigError(
        `${dir} is not an mtgen run directory (it has no ${STATE_FILE}); pass the directory run-all printed (data/mtgen/<env>/<run id>/), or start a run with \`ct run mtgen run-all\``,
      );
    }
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(file, 'utf8'));
    } catch (e) {
      throw new ConfigError(`${file} is not valid JSON (${errorMessage(e)}); restore it or fix it by hand; nothing was changed`);
    }
    const r = stateSchema.safeParse(raw);
    if (!r.success) {
      const problems = r.error.issues.slice(0, 5).map((i) => `${i.path.join('.') || '(file)'}: ${i.message}`);
      throw new ConfigError(`${file} is not a valid mtgen state (${problems.join('; ')}); restore it or fix it by hand; nothing was changed`);
    }
    return new RunState(dir, r.data);
  }

  /**
   * Claims the run for this process, so two live-runs never write one state. A lock left by a
   * process that is gone (killed) is taken over. Returns the release function.
   */
  lock(): () => void {
    const file = join(this.dir, LOCK_FILE);
    const pid = this.workingPid();
    if (pid !== undefined && pid !== process.pid) {
      throw new ConfigError(`another ct process (pid ${pid}) is working on ${this.dir}; wait for it or stop it, then run live-run again`);
    }
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${process.pid}\n`);
    renameSync(tmp, file);
    return () => rmSync(file, { force: true });
  }

  /** The pid of the live process holding the run's lock, if any. */
  workingPid(): number | undefined {
    let pid: number;
    try {
      pid = Number(readFileSync(join(this.dir, LOCK_FILE), 'utf8').trim());
    } catch {
      return undefined; // no lock: nobody is working on the run
    }
    return Number.isInteger(pid) && pid > 0 && processAlive(pid) ? pid : undefined;
  }

  /** Writes the state atomically (temp file + rename). */
  save(): void {
    const file = join(this.dir, STATE_FILE);
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(this.data, null, 2)}\n`);
    renameSync(tmp, file);
  }

  /** Adds one model call's tokens and cost to the stage's row for the model. */
  addUsage(stage: UsageStage, model: string, u: { calls: number; inputTokens: number; outputTokens: number; costUsd: number }): void {
    let row = this.data.usage.find((r) => r.stage === stage && r.model === model);
    if (!row) {
      row = { stage, model, calls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 } satisfies UsageRow;
      this.data.usage.push(row);
    }
    row.calls += u.calls;
    row.inputTokens += u.inputTokens;
    row.outputTokens += u.outputTokens;
    row.costUsd += u.costUsd;
  }

  /** Dollars spent so far, over every stage and model. */
  spentUsd(): number {
    return this.data.usage.reduce((n, r) => n + r.costUsd, 0);
  }
}
