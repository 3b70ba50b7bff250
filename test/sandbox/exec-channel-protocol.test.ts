import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

describe('native agent protocol', () => {
  test('its hello is told apart from the sh agent\'s; any other variant is refused', () => {
    const [native] = parseAll([Buffer.from('H 1 42 setsid stream native\n')]);
    assert.deepEqual(native, { type: 'hello', pid: 42, setsid: true, mode: 'stream', native: true, direct: false });
    const [sh] = parseAll([Buffer.from('H 1 42 - stream\n')]);
    assert.equal((sh as Extract<AgentFrame, { type: 'hello' }>).native, false);
    assert.equal((sh as Extract<AgentFrame, { type: 'hello' }>).direct, false);
    const [offers] = parseAll([Buffer.from('H 1 42 setsid stream native direct\n')]);
    assert.deepEqual(offers, { type: 'hello', pid: 42, setsid: true, mode: 'stream', native: true, direct: true });
    for (const bad of ['H 1 42 setsid stream other', 'H 1 42 - stream direct', 'H 1 42 setsid file native direct', 'H 1 x setsid stream']) {
      assert.equal(parseAll([Buffer.from(`${bad}\n`)])[0]!.type, 'noise', bad);
    }
  });

  test('the only answer to a direct offer on the stream is `-`: a path is malformed; the direct hello comes on the socket', () => {
    const frames = parseAll([Buffer.from('H 1 42 setsid stream native direct\nD -\nH 1 42 setsid direct native\n')]);
    assert.deepEqual(frames.slice(1), [
      { type: 'direct' },
      { type: 'hello', pid: 42, setsid: true, mode: 'direct', native: true, direct: false },
    ]);
    for (const bad of ['D /tmp/ct-agent.AbC123/s', 'D tmp/s', 'D /tmp/a b', 'D', 'D - x', 'D /tmp/\x01']) {
      assert.throws(() => parseAll([Buffer.from(`H 1 42 setsid stream native direct\n${bad}\n`, 'latin1')]), /malformed/, bad);
    }
  });

  test('stdout in O frames is taken by its announced length, whatever it holds', () => {
    const data = Buffer.from('R 1 0 0 0 0 0\nZ 1\n\0\xff', 'latin1');
    const stream = Buffer.concat([Buffer.from(`H 1 42 setsid stream native\nP 1 9 0 0\nO 1 ${data.length}\n`), data, Buffer.from('O 1 2\nokX 1 0\nR 1 0 20 20 0 0\nZ 1\n')]);
    const whole = parseAll([stream]);
    assert.deepEqual(whole.map((f) => f.type), ['hello', 'started', 'stdout', 'stdout', 'exited', 'result']);
    assert.deepEqual((whole[2] as Extract<AgentFrame, { type: 'stdout' }>).data, data);
    assert.deepEqual(parseAll([...stream].map((b) => Buffer.from([b]))), whole);
  });

  test('a command travels as NUL-terminated strings: cwd, argc, argv, assignments', () => {
    const cmd = encodeChannelCommand(['printf', '%s\n', 'a b'], { cwd: '/w d', env: { K: 'v=1\n' } })!;
    assert.equal(cmd.native.toString('utf8'), '/w d\x003\x00printf\x00%s\n\x00a b\x00K=v=1\n\x00');
    assert.equal(encodeChannelCommand(['true'], {})!.native.toString('utf8'), '\x001\x00true\x00');
  });

  const binary = fileURLToPath(new URL('../../native/ct-exec-agent', import.meta.url));
  test('the built agent, driven directly: stdout streamed, the stderr tail, stdin, env, cwd, exit codes, a bad header', { skip: !existsSync(binary) && 'the native agent was not built' }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ct-agent-test-'));
    // The cwd it is started in, where calls without a cwd run (it works from its own directory).
    const home = realpathSync(mkdtempSync(join(tmpdir(), 'ct-agent-home-')));
    writeFileSync(join(home, 'here.sh'), '#!/bin/sh\necho "here: $(pwd)"\n', { mode: 0o755 });
    const agent = spawn(binary, [dir, '200'], { cwd: home, stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: `${process.env.PATH}:.`, KEEP: 'kept', K: 'old' } });
    let stray = Buffer.alloc(0);
    let ctl = Buffer.alloc(0);
    agent.stdout.on('data', (c: Buffer) => (stray = Buffer.concat([stray, c])));
    const waiters: (() => void)[] = [];
    agent.stderr.on('data', (c: Buffer) => {
      ctl = Buffer.concat([ctl, c]);
      for (const w of waiters.splice(0)) w();
    });
    const until = async (text: string) => {
      while (!ctl.includes(text)) await new Promise<void>((r) => waiters.push(r));
    };
    const call = async (id: number, cap: number, argv: string[], opts: { env?: Record<string, string>; input?: string; cwd?: string } = {}) => {
      const cmd = encodeChannelCommand(argv, { env: opts.env, input: opts.input, cwd: opts.cwd })!;
      ctl = Buffer.alloc(0);
      agent.stdin.write(Buffer.concat([Buffer.from(`${id} ${cap} ${cmd.input.length} ${cmd.native.length}\n`), cmd.native, cmd.input]));
      await until(`Z ${id}\n`);
      // Stdout comes in O frames on the control stream; the agent's own stdout stays unused.
      const frames = parseAll([Buffer.from('H 1 1 setsid stream native\n'), ctl]);
      const out = Buffer.concat(frames.flatMap((f) => (f.type === 'stdout' ? [f.data] : []))).toString('latin1');
      return { out, ctl: ctl.toString('latin1') };
    };
    try {
      await until('\n');
      assert.match(ctl.toString(), /^H 1 \d+ setsid stream native direct\n$/);

      const a = await call(1, 10, ['sh', '-c', 'printf 0123456789abcdefghij >&2; printf out; exit 7']);
      assert.equal(a.out, 'out');
      // The exit and the last stdout may come in either order (stdout may still drain after X).
      assert.match(a.ctl, /^P 1 \d+ 0 0\n(X 1 7\nO 1 3\nout|O 1 3\noutX 1 7\n)R 1 7 3 3 20 10\nabcdefghijZ 1\n$/);

      const big = await call(2, 5, ['sh', '-c', 'head -c 300000 /dev/zero | tr "\\0" x >&2; echo done']);
      assert.equal(big.out, 'done\n');
      assert.match(big.ctl, /R 2 0 5 5 300000 5\nxxxxxZ 2\n$/);

      const env = await call(3, 1000, ['sh', '-c', 'echo "$KEEP $K $NEW"; pwd; cat'], { env: { K: 'new', NEW: 'x y' }, input: 'from stdin', cwd: '/' });
      assert.equal(env.out, 'kept new x y\n/\nfrom stdin');
      assert.equal((await call(10, 1000, ['./here.sh'])).out, `here: ${home}\n`);
      assert.equal((await call(11, 1000, ['here.sh'])).out, `here: ${home}\n`, 'a relative PATH entry is taken from there too');
      assert.equal((await call(12, 1000, ['./here.sh'], { cwd: '/' })).ctl.split('\n')[0], 'F 12', 'with a cwd, from the cwd');

      const missing = await call(4, 1000, ['ct-no-such-command']);
      assert.match(missing.ctl, /^F 4\nX 4 126\nR 4 126 0 0 0 0\nZ 4\n$/);
      const noCwd = await call(5, 1000, ['true'], { cwd: '/ct-no-such-dir' });
      assert.match(noCwd.ctl, /^F 5\n/);

      const killed = await call(6, 1000, ['sh', '-c', 'kill -9 $$']);
      assert.match(killed.ctl, /X 6 137\n/);

      // A background process holding stdout: the call ends after the drain grace (200 ms here).
      const started = Date.now();
      const held = await call(7, 1000, ['sh', '-c', 'echo begun; sleep 30 &']);
      assert.equal(held.out, 'begun\n');
      assert.ok(Date.now() - started >= 150, `ended after ${Date.now() - started} ms`);

      ctl = Buffer.alloc(0);
      agent.stdin.write('1 2 x 4\n');
      await until('\n');
      assert.equal(ctl.toString(), 'E bad request header\n');
      assert.equal(await new Promise((r) => agent.on('close', r)), 0);
      assert.equal(existsSync(dir), false, 'its directory is removed when it exits');
      assert.equal(stray.length, 0, 'nothing on the agent\'s stdout');
    } finally {
      agent.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });

  test('a direct offer: a listener in the agent\'s own pid namespace hears nothing, and the agent stays on its streams', { skip: !existsSync(binary) && 'the native agent was not built' }, async () => {
    // On this machine the test and the agent share a pid namespace, as a sandbox's own
    // processes share the agent's inside a container: such a listener must learn nothing.
    const dir = mkdtempSync(join(tmpdir(), 'ct-agent-test-'));
    const agent = spawn(binary, [dir, '200'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let ctl = '';
    const waiters: (() => void)[] = [];
    agent.stderr.on('data', (c: Buffer) => {
      ctl += c.toString('latin1');
      for (const w of waiters.splice(0)) w();
    });
    const until = async (re: RegExp) => {
      while (!re.test(ctl)) await new Promise<void>((r) => waiters.push(r));
      return re.exec(ctl)!;
    };
    const server = createServer();
    try {
      await until(/^H 1 \d+ setsid stream native direct\n/);
      // The agent's cwd is its directory: the host's socket goes there, by a plain name.
      assert.equal(readlinkSync(`/proc/${agent.pid}/cwd`), realpathSync(dir));
      await new Promise<void>((r) => server.listen(join(dir, 'ct-host'), r));
      const heard = new Promise<string>((resolve) =>
        server.once('connection', (c: Socket) => {
          let got = '';
          c.on('data', (d: Buffer) => (got += d.toString('latin1')));
          c.on('close', () => resolve(got));
        }),
      );
      agent.stdin.write(`D ${'a'.repeat(32)} ${'b'.repeat(32)} ct-host\n`);
      await until(/\nD -\n/);
      assert.equal(await heard, '', 'the listener was closed on without a word (no token)');
      assert.equal(existsSync(join(dir, 'ct-host')), false, 'the agent removes the name after the attempt');
      // The next request on stdin is answered there, as before the offer.
      const cmd = encodeChannelCommand(['echo', 'still'], {})!;
      ctl = '';
      agent.stdin.write(Buffer.concat([Buffer.from(`1 100 0 ${cmd.native.length}\n`), cmd.native]));
      await until(/Z 1\n/);
      assert.match(ctl, /^P 1 \d+ 0 0\n(X 1 0\nO 1 6\nstill\n|O 1 6\nstill\nX 1 0\n)R 1 0 6 6 0 0\nZ 1\n$/);
      // A D request with a token that is not hex is refused like any bad header.
      ctl = '';
      agent.stdin.write('D x y ct-host\n');
      await until(/\n/);
      assert.equal(ctl, 'E bad request header\n');
      assert.equal(await new Promise((r) => agent.on('close', r)), 0);
    } finally {
      agent.kill('SIGKILL');
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
