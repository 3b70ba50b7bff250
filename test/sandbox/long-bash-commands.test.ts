import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BASH_COMMAND_LIMIT } from '../../src/policies/tools/agent-tools.js';
import { ctEnv, onlyLog, runCt } from '../helpers/cli.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { runPython } from '../helpers/python.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';

/** A command of exactly `bytes` bytes: `prefix`, then a comment padding it out. */
function padded(prefix: string, bytes: number): string {
  const cmd = `${prefix}\n# ${'p'.repeat(bytes)}`.slice(0, bytes);
  assert.equal(Buffer.byteLength(cmd), bytes);
  return cmd;
}

/** The tool messages of the log's one sample, as inspect_ai reads them. */
const TOOL_MESSAGES = String.raw`
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(json.load(sys.stdin))
print(json.dumps([{"text": m.text, "error": m.error.type if m.error else None, "message": m.error.message if m.error else None}
                  for m in log.samples[0].messages if m.role == "tool"]))
`;

/**
 * Bash commands of any size up to the documented limit run alike on every exec path (exec
 * channel, plain docker exec, Docker over SSH); past it the agent gets one clear message.
 */
describe('long bash commands run on every exec path, up to the documented limit', () => {
  let work: string;
  let trajectory: string;
  let sshd: Sshd;
  const value = 'v'.repeat(200_000);
  const calls: Array<{ cmd: string; expect: (m: { text: string; error: string | null; message: string | null }) => void }> = [
    // 200 KB in one argument: past Linux's 128 KiB limit for a single exec argument.
    { cmd: `x='${value}'; echo "\${#x}"`, expect: (m) => assert.equal(m.text, '200000\n') },
    // Exactly at the limit; exit code and stderr come back as for a short command.
    {
      cmd: padded('echo at-limit; echo oops >&2; exit 3', BASH_COMMAND_LIMIT),
      expect: (m) => assert.equal(m.text, 'at-limit\noops\n[exit code 3]'),
    },
    // 15,000 single quotes: under the 16 KiB stdin threshold, and under the argument limit even
    // though each quote takes 4 bytes on an SSH command line.
    { cmd: `x="${"'".repeat(15_000)}"; echo "\${#x}"`, expect: (m) => assert.equal(m.text, '15000\n') },
    { cmd: `x="${"'".repeat(60_000)}"; echo "\${#x}"`, expect: (m) => assert.equal(m.text, '60000\n') },
    // A long command that reads stdin sees it empty, as a short one does.
    { cmd: padded('cat; echo read-stdin', 100_000), expect: (m) => assert.equal(m.text, 'read-stdin\n') },
    { cmd: 'cat; echo read-stdin', expect: (m) => assert.equal(m.text, 'read-stdin\n') },
    // One byte past the limit: one message saying what the limit is and what to do.
    {
      cmd: padded('echo too-long', BASH_COMMAND_LIMIT + 1),
      expect: (m) => {
        assert.equal(m.error, 'limit');
        assert.equal(
          m.message,
          `The command is ${BASH_COMMAND_LIMIT + 1} bytes; the bash tool runs commands of up to ${BASH_COMMAND_LIMIT} bytes (1 MiB). ` +
            'Write long content to files in parts (text_editor create, or several shorter commands), then run them.',
        );
      },
    },
  ];

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'ct-long-cmd-'));
    trajectory = join(work, 'long.jsonl');
    const lines = [...calls.map((c) => ({ function: 'bash', arguments: { cmd: c.cmd } })), { function: 'submit', arguments: { answer: 'x' } }];
    writeFileSync(trajectory, lines.map((l) => JSON.stringify(l)).join('\n'));
    sshd = await startSshd();
  });
  after(async () => {
    await sshd?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const paths: Array<[string, () => string[]]> = [
    ['the exec channel', () => []],
    ['plain docker exec', () => ['--no-exec-channel']],
    ['Docker over SSH', () => ['--sandbox', `ssh://${sshd.user}@127.0.0.1:${sshd.port}`, '--ssh-key', sshd.clientKeyFile]],
    // A replayed trajectory is not this machine's own code: the local sandbox runs it only with --unsafe-local.
    ['the local sandbox', () => ['--sandbox', 'local', '--unsafe-local']],
  ];
  for (const [name, extra] of paths) {
    test(`through ${name}`, async () => {
      const logDir = testLogDir('long-bash');
      const r = await runCt(
        ['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '--trajectory', trajectory, '--log-dir', logDir, '--quiet', ...extra()],
        { cwd: work, env: ctEnv({ CT_STATE_DIR: join(work, 'state'), SSH_AUTH_SOCK: '' }) },
      );
      assert.equal(r.code, 0, r.stderr);
      const messages = (await runPython(TOOL_MESSAGES, onlyLog(logDir))) as Array<{ text: string; error: string | null; message: string | null }>;
      assert.equal(messages.length, calls.length + 1);
      calls.forEach((c, i) => c.expect(messages[i]!));
    });
  }
});
