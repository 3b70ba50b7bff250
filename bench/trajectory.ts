/**
 * The scripted trajectory every system replays: the same N tool calls, cycling through
 * `echo`, a file write, a read of that file, `echo` again, and a command printing 1 MiB.
 * Each system gets it in its own form: ct's replay JSONL (bash / text_editor), the Inspect
 * solver's call list (sandbox().exec / write_file / read_file), and raw docker commands.
 */

export type CallKind = 'exec' | 'write' | 'read' | 'big';

export interface BenchCall {
  kind: CallKind;
  /** For exec and big: the bash command line. */
  cmd?: string;
  /** For write and read. */
  path?: string;
  /** For write. */
  text?: string;
}

/** Bytes the `big` call prints. */
export const BIG_OUTPUT_BYTES = 1024 * 1024;
const BIG_CMD = `head -c ${BIG_OUTPUT_BYTES} /dev/zero | tr '\\0' x`;
const CYCLE: CallKind[] = ['exec', 'write', 'read', 'exec', 'big'];
/** About 1 KB of text per written file. */
const FILE_TEXT = `${'the quick brown fox jumps over the lazy dog\n'.repeat(23)}`;

/** The first `n` calls of the cycle; a read always follows the write of its file. */
export function benchCalls(n: number, only?: CallKind): BenchCall[] {
  const calls: BenchCall[] = [];
  let file = 0;
  for (let i = 0; i < n; i++) {
    const kind = only ?? CYCLE[i % CYCLE.length]!;
    if (kind === 'write') file++;
    const path = `/tmp/bench/f${file}.txt`;
    if (kind === 'exec') calls.push({ kind, cmd: 'echo hi' });
    else if (kind === 'big') calls.push({ kind, cmd: BIG_CMD });
    else if (kind === 'write') calls.push({ kind, path, text: FILE_TEXT });
    else calls.push({ kind, path });
  }
  return calls;
}

/** ct's `--policy replay` JSONL: bash for commands, text_editor create/view for files. */
export function ctTrajectory(calls: BenchCall[]): string {
  const line = (c: BenchCall) => {
    switch (c.kind) {
      case 'exec':
      case 'big':
        return { function: 'bash', arguments: { cmd: c.cmd } };
      case 'write':
        return { function: 'text_editor', arguments: { command: 'create', path: c.path, file_text: c.text } };
      case 'read':
        return { function: 'text_editor', arguments: { command: 'view', path: c.path } };
    }
  };
  return calls.map((c) => JSON.stringify(line(c))).join('\n') + '\n';
}

/** The generated Inspect solver's input: the calls as they are. */
export function inspectTrajectory(calls: BenchCall[]): string {
  return calls.map((c) => JSON.stringify(c)).join('\n') + '\n';
}
