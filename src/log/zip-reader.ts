/**
 * Random-access reading of a zip (a log file or a log in memory) through yauzl: the central
 * directory once, then one member at a time, so a header-only or one-sample read of a log of
 * gigabytes touches a few kilobytes. yauzl inflates DEFLATE members; stored members are returned
 * as they are, and zstd members (Inspect's default in recent versions) go through node's zlib
 * where it has zstd (Node >= 22.15). Every member is CRC-checked (yauzl checks sizes only).
 * Small members (`ONE_SHOT_BYTES`) are inflated in one zlib call instead of through a stream.
 *
 * Untrusted archives (a trajectory, a fleet result) are held to `ArchiveLimits`: the central
 * directory's count and declared sizes are checked as it is read, and every member is counted as
 * it streams out of the inflater and cut off at its declared size and the per-member cap, so a
 * member that lies about its size is refused after reading no more than it claimed. Member names
 * with `..` segments, absolute paths or backslashes are refused.
 */
import { pipeline, type Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import yauzl from 'yauzl';
import { ConfigError } from '../errors.js';
import { archiveLimits, formatBytes, type ArchiveLimits } from './archive-limits.js';
import { METHOD_DEFLATE, METHOD_STORED, METHOD_ZSTD, crc32 } from './zip-format.js';

/**
 * Members whose declared and stored sizes are both at most this are read whole and inflated in
 * one synchronous zlib call, held to their declared size by `maxOutputLength`. A log's members
 * are mostly a few KB (a fleet result's six come to ~2 KB), and for those an inflate stream costs
 * ~8x a one-shot inflate (~120 us against ~15 us measured for a 1 KB member), plus the stream's
 * buffers to collect; a fleet merge reads three per result. Above this, members stream, so the
 * event loop is never held for more than a few milliseconds (4 MiB inflates in ~5-10 ms).
 */
const ONE_SHOT_BYTES = 4 * 1024 * 1024;

/** Present from Node 22.15 / 23.8; Node 20 cannot read zstd members. */
const createZstdDecompress = (zlib as { createZstdDecompress?: () => zlib.InflateRaw }).createZstdDecompress;

/** The zip is damaged or not a zip. */
export class ZipFormatError extends Error {
  override readonly name = 'ZipFormatError';
}

/** The zip breaks an `ArchiveLimits` cap or has an unsafe member name: refused as bad input. */
export class UnsafeArchiveError extends ConfigError {}

/** Whether `err` says the archive itself is unreadable or refused (not the machine, not ct). */
export function isBadArchiveError(err: unknown): boolean {
  return err instanceof ZipFormatError || err instanceof UnsafeArchiveError;
}

/** A member as the central directory describes it. */
export interface ZipReaderEntry {
  name: string;
  method: number;
  crc32: number;
  compressedSize: number;
  uncompressedSize: number;
  localHeaderOffset: number;
}

export class ZipReader {
  private constructor(
    /** The file, or a label for a zip read from memory. */
    readonly path: string,
    private readonly zip: yauzl.ZipFile,
    /** A name written twice resolves to its last record, as in Python's zipfile and Inspect's readers. */
    private readonly byName: Map<string, yauzl.Entry>,
    private readonly limits: ArchiveLimits,
    /** The whole zip, when it is read from memory: members are sliced from it, not streamed. */
    private readonly buffer?: Buffer,
  ) {}

  /** The zip at `path`, held to `limits` (default: the configured `archiveLimits()`). */
  static async open(path: string, limits: ArchiveLimits = archiveLimits()): Promise<ZipReader> {
    const zip = await wrap<yauzl.ZipFile>(path, (done) => yauzl.open(path, OPTIONS, done));
    return ZipReader.from(path, zip, limits);
  }

  /** A zip held in memory (e.g. a one-sample log fetched from a store); `label` names it in errors. */
  static async fromBuffer(buffer: Buffer, label: string, limits: ArchiveLimits = archiveLimits()): Promise<ZipReader> {
    const zip = await wrap<yauzl.ZipFile>(label, (done) => yauzl.fromBuffer(buffer, OPTIONS, done));
    return ZipReader.from(label, zip, limits, buffer);
  }

  private static async from(path: string, zip: yauzl.ZipFile, limits: ArchiveLimits, buffer?: Buffer): Promise<ZipReader> {
    try {
      return new ZipReader(path, zip, await readEntries(zip, path, limits), limits, buffer);
    } catch (err) {
      zip.close();
      throw err;
    }
  }

  /** Distinct member names, in the order first written. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  has(name: string): boolean {
    return this.byName.has(name);
  }

  entry(name: string): ZipReaderEntry | undefined {
    const e = this.byName.get(name);
    return (
      e && {
        name,
        method: e.compressionMethod,
        crc32: e.crc32,
        compressedSize: e.compressedSize,
        uncompressedSize: e.uncompressedSize,
        localHeaderOffset: e.relativeOffsetOfLocalHeader,
      }
    );
  }

  /**
   * The member's bytes as stored (compressed), for copying it into another zip unchanged. From a
   * zip in memory, a view of its buffer, not a copy.
   */
  async readRaw(name: string): Promise<Buffer> {
    return this.raw(this.entryOrThrow(name));
  }

  /** The member's uncompressed bytes, CRC-checked and held to the caps as they stream in. */
  async read(name: string): Promise<Buffer> {
    return (await this.inflate(this.entryOrThrow(name), true))!;
  }

  /**
   * Inflates the member without keeping it, checking its size, CRC and the caps: for a member
   * copied as stored into another zip, which must not carry a bomb or a corrupt member along.
   */
  async verify(name: string): Promise<void> {
    await this.inflate(this.entryOrThrow(name), false);
  }

  async readText(name: string): Promise<string> {
    return (await this.read(name)).toString('utf8');
  }

  async close(): Promise<void> {
    this.zip.close();
  }

  private entryOrThrow(name: string): yauzl.Entry {
    const entry = this.byName.get(name);
    if (!entry) throw new ZipFormatError(`${this.path} has no member ${name}`);
    return entry;
  }

  /**
   * Streams the member out of its decoder, counting bytes as they come: past its declared size it
   * is corrupt, past `maxEntryBytes` it is refused, and either way the stream is stopped there.
   */
  private async inflate(entry: yauzl.Entry, keep: boolean): Promise<Buffer | undefined> {
    const oneShot = entry.compressionMethod !== METHOD_ZSTD && entry.uncompressedSize <= ONE_SHOT_BYTES && entry.compressedSize <= ONE_SHOT_BYTES;
    if (oneShot) return this.inflateAtOnce(entry, keep);
    const name = entry.fileName;
    const stream = await this.decoded(entry);
    const { maxEntryBytes } = this.limits;
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let crc = 0;
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        stream.destroy();
        reject(err);
      };
      stream.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxEntryBytes) {
          return fail(new UnsafeArchiveError(`${this.path}: member ${name} expands past ${formatBytes(maxEntryBytes)} (archive.max_entry_bytes); refused`));
        }
        if (size > entry.uncompressedSize) {
          return fail(new UnsafeArchiveError(`${this.path}: member ${name} expands past the ${entry.uncompressedSize} bytes its header declares; refused`));
        }
        crc = crc32(c, crc);
        if (keep) chunks.push(c);
      });
      stream.once('end', () => {
        if (settled) return;
        settled = true;
        if (size !== entry.uncompressedSize || crc !== entry.crc32) {
          reject(new ZipFormatError(`${this.path}: member ${name} is corrupt (size or CRC mismatch)`));
        } else resolve(keep ? Buffer.concat(chunks, size) : undefined);
      });
      stream.once('error', (err: Error) => fail(err instanceof ZipFormatError ? err : new ZipFormatError(`${this.path}: member ${name}: ${err.message}`, { cause: err })));
    });
  }

  /**
   * `inflate` of a small stored or DEFLATE member, with the same checks: refused past its declared
   * size (zlib stops at `maxOutputLength`, so no more than that is ever inflated), corrupt unless
   * its size and CRC are the declared ones. The declared size is within `maxEntryBytes`, checked
   * as the directory was read.
   */
  private async inflateAtOnce(entry: yauzl.Entry, keep: boolean): Promise<Buffer | undefined> {
    const name = entry.fileName;
    if (entry.compressionMethod !== METHOD_STORED && entry.compressionMethod !== METHOD_DEFLATE) {
      throw new ZipFormatError(`${this.path}: member ${name} uses unsupported compression method ${entry.compressionMethod}`);
    }
    if (entry.isEncrypted()) throw new ZipFormatError(`${this.path}: member ${name} is encrypted`);
    const pastDeclared = () => new UnsafeArchiveError(`${this.path}: member ${name} expands past the ${entry.uncompressedSize} bytes its header declares; refused`);
    const raw = await this.raw(entry);
    let data = raw;
    if (entry.compressionMethod === METHOD_DEFLATE) {
      try {
        data = zlib.inflateRawSync(raw, { maxOutputLength: Math.max(1, entry.uncompressedSize) });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw pastDeclared();
        throw new ZipFormatError(`${this.path}: member ${name}: ${(err as Error).message}`, { cause: err });
      }
    }
    if (data.length > entry.uncompressedSize) throw pastDeclared();
    if (data.length !== entry.uncompressedSize || crc32(data) !== entry.crc32) {
      throw new ZipFormatError(`${this.path}: member ${name} is corrupt (size or CRC mismatch)`);
    }
    return keep ? data : undefined;
  }

  /** The member's stored bytes: sliced from the zip in memory, else read from the file. */
  private async raw(entry: yauzl.Entry): Promise<Buffer> {
    if (!this.buffer) return collect(await this.stream(entry, false), this.path, entry.fileName);
    // yauzl reads the local header and checks the data lies within the zip.
    const { fileDataStart } = await wrap<{ fileDataStart: number }>(this.path, (done) => this.zip.readLocalFileHeader(entry, { minimal: true }, done));
    return this.buffer.subarray(fileDataStart, fileDataStart + entry.compressedSize);
  }

  /** The member's uncompressed bytes as a stream. */
  private async decoded(entry: yauzl.Entry): Promise<Readable> {
    switch (entry.compressionMethod) {
      case METHOD_STORED:
      case METHOD_DEFLATE:
        return this.stream(entry, true);
      case METHOD_ZSTD: {
        if (!createZstdDecompress) {
          throw new ZipFormatError(
            `${this.path}: member ${entry.fileName} is zstd-compressed (Inspect's default since it switched from DEFLATE); ` +
              `this Node (${process.version}) has no zstd. Use Node >= 22.15, or rewrite the log with DEFLATE.`,
          );
        }
        const decoder = createZstdDecompress();
        return pipeline(await this.stream(entry, false), decoder, () => undefined);
      }
      default:
        throw new ZipFormatError(`${this.path}: member ${entry.fileName} uses unsupported compression method ${entry.compressionMethod}`);
    }
  }

  private stream(entry: yauzl.Entry, decode: boolean): Promise<Readable> {
    // yauzl's defaults decode (inflate); `decodeFileData: false` gives the stored bytes.
    return wrap(this.path, (done) => this.zip.openReadStream(entry, decode ? {} : { decodeFileData: false }, done));
  }
}

/** Opens `path`, runs `fn`, and closes the file whatever happens. */
export async function withZipReader<T>(path: string, fn: (zip: ZipReader) => Promise<T>, limits?: ArchiveLimits): Promise<T> {
  const zip = await ZipReader.open(path, limits);
  try {
    return await fn(zip);
  } finally {
    await zip.close();
  }
}

/**
 * Entries read up front (lazily, one at a time); the file stays open until `close`. Strict names:
 * a backslash is refused, not read as `/`. Sizes are checked by `inflate` as members stream (for
 * every method, zstd included), so yauzl's own check is off.
 */
const OPTIONS: yauzl.Options = { lazyEntries: true, autoClose: false, strictFileNames: true, validateEntrySizes: false };

/**
 * The central directory, checked as it is read: the count the end record declares and the
 * records themselves against `maxEntries`, each declared size against `maxEntryBytes` and their
 * sum against `maxTotalBytes`, each name against `unsafeNameReason`. (Reading then holds every
 * member to its declared size, so the sum also bounds what can be inflated.)
 */
function readEntries(zip: yauzl.ZipFile, path: string, limits: ArchiveLimits): Promise<Map<string, yauzl.Entry>> {
  return new Promise((resolve, reject) => {
    const byName = new Map<string, yauzl.Entry>();
    // The caller closes the zip when this rejects.
    const refuse = (what: string) => {
      reject(new UnsafeArchiveError(`${path}: ${what}; refused`));
    };
    const tooMany = () => `it has more than ${limits.maxEntries} members (archive.max_entries)`;
    if (zip.entryCount > limits.maxEntries) return refuse(tooMany());
    let count = 0;
    let total = 0;
    zip.on('entry', (entry: yauzl.Entry) => {
      const unsafe = unsafeNameReason(entry.fileName);
      if (unsafe) return refuse(`member name ${JSON.stringify(entry.fileName)} ${unsafe}`);
      if (++count > limits.maxEntries) return refuse(tooMany());
      if (entry.uncompressedSize > limits.maxEntryBytes) {
        return refuse(`member ${entry.fileName} declares ${formatBytes(entry.uncompressedSize)}, past ${formatBytes(limits.maxEntryBytes)} (archive.max_entry_bytes)`);
      }
      total += entry.uncompressedSize;
      if (total > limits.maxTotalBytes) return refuse(`its members declare more than ${formatBytes(limits.maxTotalBytes)} in all (archive.max_total_bytes)`);
      byName.set(entry.fileName, entry);
      zip.readEntry();
    });
    zip.once('end', () => resolve(byName));
    zip.once('error', (err: Error) => reject(formatError(path, err)));
    zip.readEntry();
  });
}

/**
 * Why a member name is unsafe to read (it could address a file outside wherever the archive is
 * unpacked), or undefined. yauzl refuses these too; the check is kept here so the rule has one
 * home whatever the library's options.
 */
export function unsafeNameReason(name: string): string | undefined {
  if (name.includes('\\')) return 'contains a backslash';
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) return 'is an absolute path';
  if (name.split('/').includes('..')) return 'has a ".." segment';
  return undefined;
}

/** yauzl's messages for the names `unsafeNameReason` refuses. */
const YAUZL_NAME_ERROR = /^(invalid characters in fileName|absolute path|invalid relative path): (.*)$/s;

function wrap<T>(path: string, start: (done: (err: Error | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    start((err, value) => (err ? reject(formatError(path, err)) : resolve(value)));
  });
}

function collect(stream: Readable, path: string, name: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', (err: Error) => reject(new ZipFormatError(`${path}: member ${name}: ${err.message}`, { cause: err })));
  });
}

function formatError(path: string, err: Error): Error {
  if ((err as NodeJS.ErrnoException).code) return err;
  const badName = YAUZL_NAME_ERROR.exec(err.message);
  if (badName) {
    const name = badName[2]!;
    return new UnsafeArchiveError(`${path}: member name ${JSON.stringify(name)} ${unsafeNameReason(name) ?? 'is not a safe relative path'}; refused`, { cause: err });
  }
  const incomplete = /end of central directory record signature not found/i.test(err.message);
  return new ZipFormatError(
    incomplete
      ? `${path} is not a complete zip (no end of central directory record): it may be being written, or its writer stopped mid-write`
      : `${path}: ${err.message}`,
    { cause: err },
  );
}
