/**
 * S3's naming rules for general purpose buckets
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), checked in the
 * config schema so a bad `fleet.bucket` is refused before any call, naming where it was set.
 */

/** Prefixes and suffixes S3 reserves for its own kinds of bucket and access point. */
const RESERVED_PREFIXES = ['xn--', 'sthree-', 'amzn-s3-demo-'];
const RESERVED_SUFFIXES = ['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3'];

const RULES = '3-63 characters of lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit';

/** What is wrong with `name` as an S3 bucket name, or undefined when S3 accepts it. */
export function bucketNameProblem(name: string): string | undefined {
  const problem = firstProblem(name);
  return problem && `not a valid S3 bucket name: ${problem} (bucket names are ${RULES})`;
}

function firstProblem(name: string): string | undefined {
  if (name.length < 3 || name.length > 63) return `${name.length} characters`;
  // Named without quotes: config errors quote the whole value after the message.
  const bad = [...new Set([...name.replace(/[a-z0-9.-]/g, '')].map((c) => (/[A-Z]/.test(c) ? 'uppercase letters' : /\s/.test(c) ? 'spaces' : c)))];
  if (bad.length) return `${bad.length > 1 ? `${bad.slice(0, -1).join(', ')} and ${bad.at(-1)}` : bad[0]} not allowed`;
  if (!/^[a-z0-9]/.test(name) || !/[a-z0-9]$/.test(name)) return 'it must start and end with a letter or digit';
  if (name.includes('..')) return 'two dots in a row';
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(name)) return 'it looks like an IP address';
  const prefix = RESERVED_PREFIXES.find((p) => name.startsWith(p));
  if (prefix) return `the prefix ${prefix} is reserved by S3`;
  const suffix = RESERVED_SUFFIXES.find((p) => name.endsWith(p));
  if (suffix) return `the suffix ${suffix} is reserved by S3`;
  return undefined;
}
