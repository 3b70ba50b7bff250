import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { SampleError } from '../../src/errors.js';
import { BudgetExceededError, checkBudget, estimateCallUsd, estimateEvalUsd } from '../../src/mtgen/budget.js';
import { filterCandidate } from '../../src/mtgen/filter.js';
import { jsonReply } from '../../src/mtgen/json-reply.js';
import { RunState } from '../../src/mtgen/state.js';
import type { Candidate, MtgenState } from '../../src/mtgen/types.js';

const candidate = (passes: number, scored: number): Candidate => ({
  id: 'c',
  idea: { title: 't', description: 'd', overlap: 'o' },
  stage: 'evaluated',
  repairs: 0,
  costUsd: 0,
  passes,
  scored,
});

describe('mtgen pieces', () => {
  it('the pass-rate band is inclusive at both ends', () => {
    const verdict = (p: number, n: number) => {
      const c = candidate(p, n);
      filterCandidate(c, 0.2, 0.8);
      return c.stage;
    };
    assert.equal(verdict(1, 5), 'kept');
    assert.equal(verdict(4, 5), 'kept');
    assert.equal(verdict(0, 5), 'filtered');
    assert.equal(verdict(5, 5), 'filtered');
    const none = candidate(0, 0);
    filterCandidate(none, 0.2, 0.8);
    assert.equal(none.stage, 'filtered');
    assert.match(none.reason!, /no eval epoch was scored/);
  });

  it('estimates a call high (3 characters a token, every allowed output token) and stops only past the budget', () => {
    // 3000 characters = 1000 tokens at $1/MTok, 1000 output tokens at $5/MTok.
    assert.equal(estimateCallUsd('anthropic/claude-haiku-4-5', 3000, 1000), 0.006);
    assert.equal(estimateCallUsd('openai/unpriced', 3000, 1000), 0);
    assert.equal(estimateEvalUsd('openai/gpt-4.1-nano', 2, 1_000_000), 0.2);
    checkBudget(undefined, 100, 100, 'x');
    checkBudget(1, 0.5, 0.5, 'x');
    assert.throws(() => checkBudget(1, 0.5, 0.5001, 'the next call'), (e: unknown) => e instanceof BudgetExceededError && /the next call may cost up to \$0\.5001/.test(e.message));
  });

  it('reads JSON from a fenced block or bare braces, and names missing fields', () => {
    const schema = z.object({ a: z.number() });
    assert.deepEqual(jsonReply('Sure:\n```json\n{"a": 1}\n```\nDone.', schema, 'answer'), { a: 1 });
    assert.deepEqual(jsonReply('here {"a": 2} it is', schema, 'answer'), { a: 2 });
    assert.throws(() => jsonReply('no json', schema, 'answer'), (e: unknown) => e instanceof SampleError && /answer is not valid JSON/.test(e.message));
    assert.throws(() => jsonReply('{"b": 1}', schema, 'answer'), /answer lacks fields: a:/);
  });

  it('state.json is replaced whole (no temporary file left) and reads back the same', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ct-mtgen-state-'));
    const data: MtgenState = {
      version: 1,
      runId: 'r',
      env: 'lab:tiny',
      sideTask: 's',
      createdAt: '2026-01-01T00:00:00Z',
      options: { count: 1, epochs: 1, model: 'haiku', evalModel: 'haiku', passMin: 0.2, passMax: 0.8, ec2: false, yes: false },
      done: ['gather'],
      candidates: [candidate(1, 2)],
      usage: [],
    };
    const s = RunState.create(dir, data);
    s.addUsage('ideate', 'anthropic/claude-haiku-4-5', { calls: 1, inputTokens: 10, outputTokens: 2, costUsd: 0.5 });
    s.addUsage('ideate', 'anthropic/claude-haiku-4-5', { calls: 1, inputTokens: 10, outputTokens: 2, costUsd: 0.25 });
    s.save();
    assert.deepEqual(readdirSync(dir), ['state.json']);
    const back = RunState.load(dir);
    assert.deepEqual(back.data, s.data);
    assert.equal(back.data.usage.length, 1);
    assert.equal(back.spentUsd(), 0.75);
    writeFileSync(join(dir, 'state.json'), '[]');
    assert.throws(() => RunState.load(dir), /is not a valid mtgen state/);
  });
});
