import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorExcerpt } from '../../src/eval/error-excerpt.js';

test('an excerpt keeps the first line and the last meaningful ones, without build-progress noise', () => {
  const message = [
    'SandboxUnavailableError: building images for environment web failed:',
    'time="2026-01-01T00:00:00Z" level=warning msg="Docker Compose is configured to build using Bake"',
    '#2 DONE 0.0s',
    '',
    '#3 [default internal] load metadata for docker.io/library/debian:bookworm-slim',
    '#4 CACHED',
    '#5 [default 2/2] RUN make',
    '#5 ERROR: executor failed running [/bin/sh -c make]: exit code: 2',
    '------',
    'Fix the build and run again.',
  ].join('\n');
  assert.deepEqual(errorExcerpt(message), [
    'SandboxUnavailableError: building images for environment web failed:',
    '#5 [default 2/2] RUN make',
    '#5 ERROR: executor failed running [/bin/sh -c make]: exit code: 2',
    'Fix the build and run again.',
  ]);
});

test('long messages are cut to the last lines and each line to the width', () => {
  const message = ['first', ...Array.from({ length: 20 }, (_, i) => `line ${i}`), 'x'.repeat(300)].join('\n');
  const lines = errorExcerpt(message, { maxLines: 4, width: 50 });
  assert.deepEqual(lines.slice(0, 3), ['first', '…', 'line 19']);
  assert.equal(lines[3]!.length, 50);
  assert.ok(lines[3]!.endsWith('…'));
  assert.deepEqual(errorExcerpt('only line'), ['only line']);
  assert.deepEqual(errorExcerpt('a\nb\nc', { maxLines: 1 }), ['a']);
  assert.deepEqual(errorExcerpt('a\nb\nc', { maxLines: 2 }), ['a', 'c']);
  assert.deepEqual(errorExcerpt('a\nb\nc\nd', { maxLines: 3 }), ['a', '…', 'd']);
});
