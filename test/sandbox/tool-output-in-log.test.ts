import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LOGGED_OUTPUT_TAIL_BYTES } from '../../src/policies/tools/agent-tools.js';
import { ctEnv, onlyLog, runCt } from '../helpers/cli.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { runPython } from '../helpers/python.js';

/** The tool events and messages of the log's one sample as inspect_ai reads them, and the sample's stored (uncompressed) size. */
const READ = String.raw`
import json, sys, zipfile
from inspect_ai.log import read_eval_log
path = json.load(sys.stdin)
log = read_eval_log(path)
s = log.samples[0]
with zipfile.ZipFile(path) as z:
    stored = sum(i.file_size for i in z.infolist() if i.filename.startswith("samples/"))
print(json.dumps({
  "stored": stored,
  "events": [{"result": e.result, "truncated": list(e.truncated) if e.truncated else None, "metadata": e.metadata}
             for e in s.events if e.event == "tool" and e.function == "bash"],
  "messages": [m.text for m in s.messages if m.role == "tool" and m.function == "bash"],
}))
`;

/**
 * A tool event keeps what the model saw, a bounded tail of the output (and says so), and the
 * output's true size: three 12 MB outputs no longer make a log of tens of megabytes.
 */
describe('tool output in the log: what the model saw, a bounded tail and the true size', () => {
  let work: string;
  let trajectory: string;
  // 12,000,000 bytes on stdout (past the 10 MiB capture cap), not ending in a newline, then 14 on stderr.
  const cmd = 'yes 0123456789abcdef | head -c 12000000; echo END-OF-OUTPUT >&2';
  const trueSize = 12_000_000 + 1 + 14;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-tool-output-'));
    trajectory = join(work, 'big.jsonl');
    const lines = [
      ...Array.from({ length: 3 }, () => ({ function: 'bash', arguments: { cmd } })),
      { function: 'bash', arguments: { cmd: 'echo short' } },
      { function: 'submit', arguments: { answer: 'x' } },
    ];
    writeFileSync(trajectory, lines.map((l) => JSON.stringify(l)).join('\n'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  for (const [name, extra] of [
    ['the exec channel', []],
    ['plain docker exec', ['--no-exec-channel']],
  ] as const) {
    test(`through ${name}`, async () => {
      const logDir = testLogDir('tool-output');
      const r = await runCt(
        ['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '--trajectory', trajectory, '--log-dir', logDir, '--quiet', ...extra],
        { cwd: work, env: ctEnv() },
      );
      assert.equal(r.code, 0, r.stderr);
      const got = await runPython(READ, onlyLog(logDir));
      assert.equal(got.events.length, 4);
      for (let i = 0; i < 3; i++) {
        const e = got.events[i];
        assert.equal(e.result, got.messages[i], 'the event holds exactly what the model saw');
        // The 10 MiB capture kept the last 10485760 bytes of stdout; the model is told so.
        assert.match(e.result, /\n\n\[output truncated: \d+ of 12000015 characters omitted; the first 1514240 bytes were not captured, so the part above is not the beginning\]\n\n/);
        assert.match(e.result, /012345\nEND-OF-OUTPUT\n$/);
        assert.deepEqual(e.truncated, [trueSize, Buffer.byteLength(e.result)], '[true original size, size shown]');
        assert.equal(e.metadata.output_bytes, trueSize);
        assert.equal(Buffer.byteLength(e.metadata.output_tail), LOGGED_OUTPUT_TAIL_BYTES);
        assert.match(e.metadata.output_tail, /cdef\n012345\nEND-OF-OUTPUT\n$/);
        assert.match(e.metadata.output_note, new RegExp(`The output was ${trueSize} bytes; the result is what the model saw\\. output_tail holds the output's last ${LOGGED_OUTPUT_TAIL_BYTES} bytes`));
      }
      assert.deepEqual(got.events[3], { result: 'short\n', truncated: null, metadata: null }, 'short output: nothing added');
      // Each big call stores ~16 KB twice (event and message) plus the 64 KiB tail.
      assert.ok(got.stored < 1_000_000, `the sample takes ${got.stored} bytes in the log`);
    });
  }
});
