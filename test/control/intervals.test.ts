/**
 * The numbers under `ct game-metrics`: thresholds equal numpy.percentile's to the last bit, and
 * the Clopper-Pearson interval matches its closed forms and published values.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { betaQuantile, clopperPearson, regularizedBeta, seededRandom } from '../../src/control/metrics/intervals.js';
import { percentile } from '../../src/control/metrics/percentile.js';
import { runPython } from '../helpers/python.js';

function close(actual: number, expected: number, tolerance: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= tolerance, `${what}: ${actual} is not within ${tolerance} of ${expected}`);
}

/** P(X >= k) for X ~ Binomial(n, p), summed term by term (independent of the beta function). */
function binomialUpperTail(k: number, n: number, p: number): number {
  let total = 0;
  let coefficient = 1;
  for (let i = 0; i <= n; i++) {
    if (i > 0) coefficient = (coefficient * (n - i + 1)) / i;
    if (i >= k) total += coefficient * p ** i * (1 - p) ** (n - i);
  }
  return total;
}

describe('Clopper-Pearson 95% interval', () => {
  test('published values: 0 of 10 -> [0, 0.3085], 5 of 10 -> [0.1871, 0.8129], 10 of 10 -> [0.6915, 1]', () => {
    const [lo0, hi0] = clopperPearson(0, 10)!;
    assert.equal(lo0, 0);
    // k = 0: the upper bound solves (1 - p)^10 = 0.025.
    close(hi0, 1 - 0.025 ** (1 / 10), 1e-12, '0/10 upper');
    close(hi0, 0.3085, 5e-5, '0/10 upper (4 places)');
    const [lo5, hi5] = clopperPearson(5, 10)!;
    close(lo5, 0.1871, 5e-5, '5/10 lower');
    close(hi5, 0.8129, 5e-5, '5/10 upper');
    close(lo5 + hi5, 1, 1e-12, '5/10 is symmetric');
    const [lo10, hi10] = clopperPearson(10, 10)!;
    close(lo10, 0.025 ** (1 / 10), 1e-12, '10/10 lower');
    assert.equal(hi10, 1);
    // k = 1: the lower bound solves 1 - (1 - p)^n = 0.025.
    close(clopperPearson(1, 20)![0], 1 - 0.975 ** (1 / 20), 1e-12, '1/20 lower');
    assert.equal(clopperPearson(0, 0), null);
  });

  test('each bound leaves 2.5% in its binomial tail (k of n, several sizes)', () => {
    for (const [k, n] of [
      [3, 20],
      [9, 12],
      [1, 7],
      [47, 100],
      [250, 1000],
    ] as const) {
      const [lo, hi] = clopperPearson(k, n)!;
      // Lower: P(X >= k | p = lo) = 0.025; upper: P(X <= k | p = hi) = 0.025.
      close(binomialUpperTail(k, n, lo), 0.025, 1e-9, `${k}/${n} lower tail`);
      close(1 - binomialUpperTail(k + 1, n, hi), 0.025, 1e-9, `${k}/${n} upper tail`);
    }
  });

  test('the beta distribution function and quantile agree with closed forms', () => {
    // I_x(1, 1) = x; I_x(2, 1) = x^2; I_x(1, b) = 1 - (1 - x)^b.
    close(regularizedBeta(0.3, 1, 1), 0.3, 1e-14, 'I(1,1)');
    close(regularizedBeta(0.3, 2, 1), 0.09, 1e-14, 'I(2,1)');
    close(regularizedBeta(0.8, 1, 5), 1 - 0.2 ** 5, 1e-14, 'I(1,5)');
    close(betaQuantile(0.5, 3, 3), 0.5, 1e-14, 'median of Beta(3,3)');
    close(betaQuantile(0.25, 2, 1), 0.5, 1e-14, 'Beta(2,1) quantile');
  });
});

describe('seeded bootstrap generator', () => {
  test('the same seed gives the same stream; another seed another', () => {
    const take = (seed: number) => Array.from({ length: 5 }, seededRandom(seed));
    assert.deepEqual(take(0), take(0));
    assert.notDeepEqual(take(0), take(1));
    for (const x of take(42)) assert.ok(x >= 0 && x < 1);
  });
});

describe('thresholds', () => {
  test('percentile equals numpy.percentile (linear) exactly, ties and one value included', async () => {
    const random = seededRandom(7);
    const arrays = [
      [3],
      [0, 10],
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      [2, 2, 2, 7, 7, 9],
      Array.from({ length: 37 }, () => Math.round(random() * 1000) / 100),
      Array.from({ length: 500 }, () => random() * 10),
      Array.from({ length: 64 }, () => Math.floor(random() * 11)),
    ];
    const budgets = [0.1, 0.5, 1, 2.5, 5, 10, 33.3, 50, 99, 100];
    const numpy = await runPython(
      'import json, sys, numpy as np\n' +
        'd = json.load(sys.stdin)\n' +
        'print(json.dumps([[float(np.percentile(a, 100 - b)) for b in d["budgets"]] for a in d["arrays"]]))',
      { arrays, budgets },
    );
    arrays.forEach((a, i) => {
      budgets.forEach((b, j) => assert.equal(percentile(a, 100 - b), numpy[i][j], `array ${i}, budget ${b}`));
    });
  });
});
