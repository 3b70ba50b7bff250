/**
 * A policy for the fleet utilisation bench (bench/fleet-utilisation.ts): no model, no tool call;
 * each sample takes a time set by its epoch, 1-20 s, and every 50th (epochs 7, 57, ...) is a
 * straggler of 45 s. Deterministic, so a run's total work is known in advance. Loaded by ct as
 * `dist/bench/policies/mixed-length.js:policy`.
 */
import type { Policy, PolicyContext, PolicyResult } from '../../src/policies/types.js';

export function secondsFor(epoch: number): number {
  if (epoch % 50 === 7) return 45;
  return 1 + ((epoch * 7919) % 20);
}

export const policy: Policy = {
  name: 'mixed-length',
  async run(ctx: PolicyContext): Promise<PolicyResult> {
    const ms = secondsFor(ctx.epoch) * 1000;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      ctx.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });
    return { submission: `slept ${ms / 1000} s` };
  },
};
