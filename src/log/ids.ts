/**
 * Ids shaped like the ones Inspect writes (`shortuuid`): 22 characters of base 57, random.
 */
import { randomBytes } from 'node:crypto';

/** shortuuid's alphabet: digits and letters without the look-alikes 0, 1, I, O, l. */
const ALPHABET = '23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE = BigInt(ALPHABET.length);
/** 57^22 > 2^128, so 22 digits hold 128 random bits. */
const LENGTH = 22;

/** A new random id for `eval_id`, `run_id`, `task_id`, sample `uuid`, event `uuid`, message `id`. */
export function shortUuid(): string {
  let n = BigInt(`0x${randomBytes(16).toString('hex')}`);
  let out = '';
  for (let i = 0; i < LENGTH; i++) {
    out = ALPHABET[Number(n % BASE)] + out;
    n /= BASE;
  }
  return out;
}
