import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { encodeChannelCommand } from '../../src/sandbox/exec-channel/channel-command.js';
import { FrameParser, type AgentFrame } from '../../src/sandbox/exec-channel/frame-parser.js';

/** A control stream as the agent writes it; the stderr payload holds frame-like text on purpose. */
const payload = Buffer.concat([Buffer.from('Z 7\nR 8 0 1 1 0 0\n\0\xff', 'latin1'), Buffer.from('é\n')]);
const stream = Buffer.concat([
  Buffer.from('H 1 42 /usr/bin/setsid stream\nP 7 100 98 99\nX 7 3\n'),
  Buffer.from(`R 7 3 12 12 ${payload.length} ${payload.length}\n`),
  payload,
  Buffer.from('Z 7\nF 8\nX 8 126\nR 8 126 0 0 0 0\nZ 8\nR 9 0 ? ? 0 0\nZ 9\n'),
]);

function parseAll(chunks: Buffer[]): AgentFrame[] {
  const p = new FrameParser();
  return chunks.flatMap((c) => p.push(c));
}

describe('exec channel protocol', () => {
  test('frames parse the same however the stream is split', () => {
    const whole = parseAll([stream]);
    assert.deepEqual(
      whole.map((f) => f.type),
      ['hello', 'started', 'exited', 'result', 'not-started', 'exited', 'result', 'result'],
    );
    const r = whole[3] as Extract<AgentFrame, { type: 'result' }>;
    assert.deepEqual([r.id, r.code, r.stdoutTotal, r.stdoutSent, r.stderrTotal], [7, 3, 12, 12, payload.length]);
    assert.deepEqual(r.stderr, payload);
    assert.deepEqual(whole[7], { type: 'result', id: 9, code: 0, stdoutTotal: undefined, stdoutSent: undefined, stderrTotal: 0, stderr: Buffer.alloc(0) });
    const bytes = [...stream].map((b) => Buffer.from([b]));
    assert.deepEqual(parseAll(bytes), whole);
    for (let cut = 1; cut < stream.length; cut += 7) assert.deepEqual(parseAll([stream.subarray(0, cut), stream.subarray(cut)]), whole);
  });

  test('lines before the hello that are not frames are skipped as noise', () => {
    const frames = parseAll([Buffer.from('WARNING: something from docker\nH 1 7 - file\nX 1 0\n')]);
    assert.deepEqual(
      frames.map((f) => f.type),
      ['noise', 'hello', 'exited'],
    );
    assert.throws(() => parseAll([Buffer.from('H 1 7 - file\nWARNING: after the hello\n')]), /unknown frame/);
  });

  test('a payload shorter or longer than announced is caught, not misread', () => {
    const hello = 'H 1 7 - stream\n';
    assert.throws(() => parseAll([Buffer.from(`${hello}R 1 0 0 0 3 3\nabcdZ 1\n`)]), /expected trailer/);
    assert.throws(() => parseAll([Buffer.from(`${hello}R 1 0 0 0 5 5\nabcZ 1\n\n`)]), /expected trailer/);
    assert.throws(() => parseAll([Buffer.from(`${hello}Q what\n`)]), /unknown frame/);
    assert.throws(() => parseAll([Buffer.from(`${hello}R 1 0 ? 3 0 0\n`)]), /malformed/);
    assert.throws(() => parseAll([Buffer.alloc(600, 'x')]), /too long/);
  });

  test('argv, cwd and env survive sh exactly', () => {
    const args = ['a b', "it's", '"dq"', 'x\ny', '\n', '', 'trail\n', '$HOME', '`id`', '$(id)', '\\', "'", '*', '-n', 'é ✓ 🚀', '\r\n'];
    const env = { V: "it's\n$HOME `id` é", W: '' };
    const cmd = encodeChannelCommand(args, { cwd: "/tmp/it's\nhere", env })!;
    assert.ok(!cmd.script.includes(10), 'one line');
    // The agent's own definitions, then the script as the agent evaluates it.
    const prelude = `ct_n='\n'; ct_u() { :; }; ct_f() { exit 126; }; cd() { printf '<%s>' "$2"; };`;
    const out = execFileSync('sh', ['-c', `${prelude} eval "$(cat)"; for a; do printf '[%s]' "$a"; done; printf '{%s}{%s}' "$V" "$W"`], {
      input: cmd.script,
    }).toString('utf8');
    assert.equal(out, `<${"/tmp/it's\nhere"}>${args.map((a) => `[${a}]`).join('')}{${env.V}}{}`);
  });

  test('commands sh cannot express exactly are refused (they go to plain docker exec)', () => {
    assert.equal(encodeChannelCommand(['echo', 'a\0b'], {}), undefined);
    assert.equal(encodeChannelCommand(['true'], { env: { 'A.B': '1' } }), undefined);
    assert.equal(encodeChannelCommand(['true'], { env: { ct_d: '1' } }), undefined);
    assert.equal(encodeChannelCommand(['true'], { cwd: 'relative' }), undefined);
    assert.ok(encodeChannelCommand(['true'], { env: { CT_D: '1', _x: '2' }, cwd: '/' }));
  });

  test('stdin goes as bytes, text as UTF-8', () => {
    assert.deepEqual(encodeChannelCommand(['cat'], { input: 'é' })!.input, Buffer.from('é'));
    const bytes = new Uint8Array([0, 255, 10]);
    assert.deepEqual(encodeChannelCommand(['cat'], { input: bytes })!.input, Buffer.from(bytes));
  });
});
