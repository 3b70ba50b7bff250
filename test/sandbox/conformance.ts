import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ExecTimeoutError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
} from '../../src/errors.js';
import { MAX_ARGV_BYTES } from '../../src/sandbox/argv-limit.js';
import type { SampleSandboxes, Sandbox, SandboxEnvSpec, SandboxProvider } from '../../src/sandbox/types.js';

export interface ConformanceTarget {
  name: string;
  provider: () => Promise<SandboxProvider>;
  env: SandboxEnvSpec;
  /** Whether `user` switching can be checked (needs root or a container). */
  users: boolean;
  /** Services expected besides `default`. */
  services: string[];
  /** Commands go through an exec channel, which takes arguments up to MAX_CHANNEL_ARGV_BYTES. */
  channelArgv?: boolean;
}

/**
 * The behaviour every sandbox provider must have (modelled on Inspect's sandbox self-check):
 * exec with stdin/env/cwd/user/timeouts, large and binary output, files of every kind, errors.
 */
export function conformanceSuite(target: ConformanceTarget): void {
  describe(`sandbox conformance: ${target.name}`, () => {
    let provider: SandboxProvider;
    let sandboxes: SampleSandboxes;
    let sb: Sandbox;

    before(async () => {
      provider = await target.provider();
      await provider.taskInit(target.env);
      sandboxes = await provider.sampleInit(target.env, { label: 'conformance' });
      sb = sandboxes.get('default')!;
    });

    after(async () => {
      if (sandboxes) await provider.sampleCleanup(sandboxes);
      await provider?.taskCleanup();
    });

    test('sampleInit returns the default service first, then the others', () => {
      assert.deepEqual([...sandboxes.keys()], ['default', ...target.services]);
    });

    test('exec returns stdout, stderr and the exit code separately', async () => {
      const r = await sb.exec(['sh', '-c', 'echo out; echo err >&2; exit 3']);
      assert.equal(r.stdout, 'out\n');
      assert.equal(r.stderr, 'err\n');
      assert.equal(r.returncode, 3);
      assert.equal(r.success, false);
      const ok = await sb.exec(['echo', 'hello']);
      assert.deepEqual([ok.success, ok.returncode, ok.stdout], [true, 0, 'hello\n']);
    });

    test('arguments past the exec limit fail alike on every path; just under it they run; a channel takes more', async () => {
      const r = await sb.exec(['echo', 'x'.repeat(200_000)]);
      // Through a channel, one argument past the kernel's 128 KiB fails with the kernel's own words.
      if (target.channelArgv) assert.deepEqual([r.returncode, r.stderr], [126, 'echo: Argument list too long\n']);
      else assert.deepEqual(r, {
        success: false,
        returncode: 126,
        stdout: '',
        stderr: `ct: cannot run echo: its arguments take 200010 bytes; a command's arguments may take at most ${MAX_ARGV_BYTES} bytes (pass long text on stdin or in a file)\n`,
      });
      const quotes = await sb.exec(['echo', "'".repeat(30_000)]);
      if (target.channelArgv) {
        // No command line on the way: only the kernel's limits apply (128 KiB an argument).
        assert.equal(quotes.stdout.length, 30_001);
        const chunk = 'x'.repeat(64 * 1024);
        const big = await sb.exec(['printf', '%s', ...Array<string>(16).fill(chunk)]);
        assert.equal(big.stdout.length, 16 * chunk.length, big.stderr);
      } else assert.match(quotes.stderr, /its arguments take 120010 bytes/, 'a quote counts 4 times, as the SSH command line needs');
      const ok = await sb.exec(['sh', '-c', 'printf %s "$1" | wc -c', 'sh', 'y'.repeat(MAX_ARGV_BYTES - 100)]);
      assert.equal(ok.stdout.trim(), String(MAX_ARGV_BYTES - 100));
    });

    test('exec passes stdin as text and as bytes', async () => {
      assert.equal((await sb.exec(['cat'], { input: 'line1\nline2' })).stdout, 'line1\nline2');
      const bytes = new Uint8Array([0, 1, 2, 255, 10]);
      const r = await sb.exec(['sh', '-c', 'od -An -tu1 | tr -s " " | sed "s/^ //"'], { input: bytes });
      assert.equal(r.stdout.trim(), '0 1 2 255 10');
    });

    test('exec sets environment variables and cwd', async () => {
      const r = await sb.exec(['sh', '-c', 'echo "$FOO|$BAR"'], { env: { FOO: 'a b', BAR: 'é' } });
      assert.equal(r.stdout, 'a b|é\n');
      await sb.exec(['mkdir', '-p', '/tmp/ct-cwd-test']);
      assert.equal((await sb.exec(['pwd'], { cwd: '/tmp/ct-cwd-test' })).stdout, '/tmp/ct-cwd-test\n');
    });

    test('exec runs as another user', { skip: !target.users }, async () => {
      const r = await sb.exec(['id', '-un'], { user: 'nobody' });
      assert.equal(r.stdout.trim(), 'nobody');
      assert.equal((await sb.exec(['id', '-u'])).stdout.trim(), '0');
    });

    test('a missing command fails with a non-zero exit code', async () => {
      const r = await sb.exec(['ct-no-such-command-xyz']);
      assert.equal(r.success, false);
      assert.ok(r.returncode === 126 || r.returncode === 127, `exit ${r.returncode}`);
    });

    test('a timeout raises with the partial output and kills the process tree', async () => {
      const marker = `ct-timeout-${Date.now()}`;
      const started = Date.now();
      await assert.rejects(
        // Durations nothing else on the machine runs: on `local` the check below sees every process.
        sb.exec(['sh', '-c', `echo started; sleep 3137 & sleep 3138; echo never`], { timeout: 1, env: { MARK: marker } }),
        (e: unknown) => e instanceof ExecTimeoutError && e.stdout.includes('started') && !e.stdout.includes('never'),
      );
      assert.ok(Date.now() - started < 8000, 'returned promptly');
      await new Promise((r) => setTimeout(r, 300));
      const ps = await sb.exec(['sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done']);
      assert.ok(!/sleep 313[78]/.test(ps.stdout), `processes left behind:\n${ps.stdout}`);
    });

    test('exec that finishes within its timeout is unaffected', async () => {
      const r = await sb.exec(['sh', '-c', 'read x; echo got $x'], { timeout: 30, input: 'it\n' });
      assert.equal(r.stdout, 'got it\n');
    });

    test('large output (5 MB) arrives whole', async () => {
      const r = await sb.exec(['sh', '-c', 'head -c 5000000 /dev/zero | tr "\\0" a']);
      assert.equal(r.stdout.length, 5_000_000);
    });

    test('unicode survives exec and files', async () => {
      const text = 'héllo wörld ✓ 日本語 🚀\n';
      assert.equal((await sb.exec(['printf', '%s', text])).stdout, text);
      await sb.writeFile('/tmp/ct-conf/unicode.txt', text);
      assert.equal(await sb.readFile('/tmp/ct-conf/unicode.txt'), text);
    });

    test('writeFile creates parent directories; readFile keeps CRLF', async () => {
      await sb.writeFile('/tmp/ct-conf/a/b/c.txt', 'one\r\ntwo\r\n');
      assert.equal(await sb.readFile('/tmp/ct-conf/a/b/c.txt'), 'one\r\ntwo\r\n');
      assert.equal((await sb.exec(['wc', '-c', '/tmp/ct-conf/a/b/c.txt'])).stdout.trim().split(/\s+/)[0], '10');
    });

    test('binary files round trip byte for byte', async () => {
      const bytes = new Uint8Array(256 * 4);
      for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256;
      await sb.writeFile('/tmp/ct-conf/bin.dat', bytes);
      const back = await sb.readFile('/tmp/ct-conf/bin.dat', 'bytes');
      assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
    });

    test('overwriting a file replaces its contents', async () => {
      await sb.writeFile('/tmp/ct-conf/over.txt', 'long contents here');
      await sb.writeFile('/tmp/ct-conf/over.txt', 'short');
      assert.equal(await sb.readFile('/tmp/ct-conf/over.txt'), 'short');
    });

    test('a large file (3 MB) round trips', async () => {
      const big = 'x'.repeat(3 * 1024 * 1024);
      await sb.writeFile('/tmp/ct-conf/big.txt', big);
      assert.equal((await sb.readFile('/tmp/ct-conf/big.txt')).length, big.length);
    });

    test('reading a missing file raises not-found', async () => {
      await assert.rejects(sb.readFile('/tmp/ct-conf/does-not-exist'), SandboxFileNotFoundError);
    });

    test('reading or writing a directory raises is-a-directory', async () => {
      await sb.exec(['mkdir', '-p', '/tmp/ct-conf/dir']);
      await assert.rejects(sb.readFile('/tmp/ct-conf/dir'), SandboxIsADirectoryError);
      await assert.rejects(sb.writeFile('/tmp/ct-conf/dir', 'x'), SandboxIsADirectoryError);
    });

    test('writing where the sandbox may not raises permission denied', async () => {
      await assert.rejects(sb.writeFile('/proc/version', 'x'), SandboxPermissionError);
    });

    test('the sandbox reports itself alive', async () => {
      assert.equal(await sb.isAlive(), true);
    });

    test('concurrent execs on one sandbox do not mix', async () => {
      const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => sb.exec(['sh', '-c', `echo ${i}; echo e${i} >&2`])));
      rs.forEach((r, i) => {
        assert.equal(r.stdout, `${i}\n`);
        assert.equal(r.stderr, `e${i}\n`);
      });
    });
  });
}
