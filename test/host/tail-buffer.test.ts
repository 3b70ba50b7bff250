import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TailBuffer } from '../../src/host/tail-buffer.js';

test('output past the cap keeps the tail and says how much was dropped', () => {
  const b = new TailBuffer(10);
  b.push(Buffer.from('0123456'));
  b.push(Buffer.from('789abcdef'));
  assert.equal(b.toBuffer().toString(), '6789abcdef');
  assert.equal(b.dropped, 6);
  assert.equal(b.truncated, true);
});

test('output under the cap is kept whole', () => {
  const b = new TailBuffer(100);
  b.push(Buffer.from('hello '));
  b.push(Buffer.from('world'));
  assert.equal(b.toBuffer().toString(), 'hello world');
  assert.equal(b.truncated, false);
});
