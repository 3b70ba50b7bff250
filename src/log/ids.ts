/**
 * Ids shaped like the ones Inspect writes (`shortuuid`): 22 characters of base 57, random.
 */
import { createHash, randomBytes } from 'node:crypto';

/** shortuuid's alphabet: digits and letters without the look-alikes 0, 1, I, O, l. */
const ALPHABET = '23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';
const BASE = BigInt(ALPHABET.length);
/** 57^22 > 2^128, so 22 digits hold 128 random bits. */
const LENGTH = 22;

/** A new random id for `eval_id`, `run_id`, `task_id`, sample `uuid`, event `uuid`, message `id`. */
export function shortUuid(): string {
  return encode(randomBytes(16));
}

/**
 * An id of the same shape derived from `seed` (its SHA-256): the same seed gives the same id.
 * In shortuuid's alphabet, so `inspect log list` can split file names on `_` and `-` around it.
 */
export function stableShortId(seed: string): string {
  return encode(createHash('sha256').update(seed).digest().subarray(0, 16));
}

function encode(bytes: Uint8Array): string {
  let n = BigInt(`0x${Buffer.from(bytes).toString('hex')}`);
  let out = '';
  for (let i = 0; i < LENGTH; i++) {
    out = ALPHABET[Number(n % BASE)] + out;
    n /= BASE;
  }
  return out;
}
