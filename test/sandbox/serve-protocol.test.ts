/**
 * `ct sandbox serve`'s framing and handshake, without Docker: frames split anywhere in the
 * stream, binary bodies kept as they are, a caller of another protocol version refused, requests
 * before the hello refused, a stream out of step ending the process.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { encodeFrame, FrameReader, MAX_HEADER_BYTES, type Frame } from '../../src/sandbox/serve/frames.js';
import { SERVE_PROTOCOL } from '../../src/sandbox/serve/serve-session.js';
import { CT_BIN } from '../helpers/paths.js';

describe('ct sandbox serve: frames', () => {
  test('frames cut at every byte boundary come out whole, bodies byte for byte', () => {
    const body = Buffer.from([0, 255, 10, 13, 0x80, 1]);
    const stream = Buffer.concat([encodeFrame({ id: 1, op: 'a' }, body), encodeFrame({ id: 2, op: 'é' })]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const reader = new FrameReader();
      const frames = [...reader.push(stream.subarray(0, cut)), ...reader.push(stream.subarray(cut))];
      assert.deepEqual(
        frames.map((f: Frame) => [f.header, [...f.body]]),
        [
          [{ id: 1, op: 'a' }, [...body]],
          [{ id: 2, op: 'é' }, []],
        ],
      );
    }
  });

  test('a header past the limit, or not a JSON object, is refused', () => {
    const big = Buffer.alloc(8);
    big.writeUInt32BE(MAX_HEADER_BYTES + 1, 0);
    assert.throws(() => new FrameReader().push(big), /frame too large/);
    const notObject = Buffer.concat([Buffer.from([0, 0, 0, 2, 0, 0, 0, 0]), Buffer.from('[]')]);
    assert.throws(() => new FrameReader().push(notObject), /not a JSON object/);
  });
});

describe('ct sandbox serve: handshake', () => {
  /** Sends `frames` to a fresh `ct sandbox serve`, closes its input, returns what it answered. */
  function converse(frames: Buffer[]): Promise<{ answers: Frame[]; code: number | null; stderr: string }> {
    const state = mkdtempSync(join(tmpdir(), 'ct-serve-'));
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [CT_BIN, 'sandbox', 'serve'], { env: { ...process.env, CT_STATE_DIR: state }, stdio: ['pipe', 'pipe', 'pipe'] });
      const reader = new FrameReader();
      const answers: Frame[] = [];
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => answers.push(...reader.push(d)));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => {
        rmSync(state, { recursive: true, force: true });
        resolve({ answers, code, stderr });
      });
      for (const f of frames) child.stdin.write(f);
      setTimeout(() => child.stdin.end(), 1500);
    });
  }

  test('the hello answers with the protocol and ct version; another version and requests before it are refused', async () => {
    const ok = await converse([encodeFrame({ id: 1, op: 'exec', handle: '1', cmd: ['true'] }), encodeFrame({ id: 2, op: 'hello', protocol: SERVE_PROTOCOL })]);
    assert.equal(ok.code, 0, ok.stderr);
    const [early, hello] = ok.answers;
    assert.deepEqual([early!.header.id, early!.header.ok, (early!.header.error as { type: string }).type], [1, false, 'protocol']);
    assert.equal(hello!.header.ok, true);
    assert.equal(hello!.header.protocol, SERVE_PROTOCOL);
    assert.match(String(hello!.header.ct_version), /^\d+\.\d+\.\d+/);

    const refused = await converse([encodeFrame({ id: 1, op: 'hello', protocol: SERVE_PROTOCOL + 1 })]);
    const error = refused.answers[0]!.header.error as { type: string; message: string };
    assert.equal(error.type, 'protocol');
    assert.match(error.message, /install matching versions of ct and inspect-ct/);
  });

  test('a stream out of step ends the process, saying why', async () => {
    const r = await converse([Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /out of step: frame too large/);
  });
});
