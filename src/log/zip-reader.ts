/**
 * Random-access reading of a zip (a log file or a log in memory) through yauzl: the central
 * directory once, then one member at a time, so a header-only or one-sample read of a log of
 * gigabytes touches a few kilobytes. yauzl inflates DEFLATE members; stored members are returned
 * as they are, and zstd members (Inspect's default in recent versions) go through node's zlib
 * where it has zstd (Node >= 22.15). Every member is CRC-checked (yauzl checks sizes only).
 */
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import yauzl from 'yauzl';
import { METHOD_DEFLATE, METHOD_STORED, METHOD_ZSTD, crc32 } from './zip-format.js';

/** Present from Node 22.15 / 23.8; Node 20 cannot read zstd members. */
const zstdDecompress = (zlib as { zstdDecompress?: typeof zlib.inflateRaw }).zstdDecompress;

export class ZipFormatError extends Error {
  override readonly name = 'ZipFormatError';
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
  ) {}

  static async open(path: string): Promise<ZipReader> {
    const zip = await wrap<yauzl.ZipFile>(path, (done) => yauzl.open(path, OPTIONS, done));
    return ZipReader.from(path, zip);
  }

  /** A zip held in memory (e.g. a one-sample log fetched from a store); `label` names it in errors. */
  static async fromBuffer(buffer: Buffer, label: string): Promise<ZipReader> {
    const zip = await wrap<yauzl.ZipFile>(label, (done) => yauzl.fromBuffer(buffer, OPTIONS, done));
    return ZipReader.from(label, zip);
  }

  private static async from(path: string, zip: yauzl.ZipFile): Promise<ZipReader> {
    try {
      return new ZipReader(path, zip, await readEntries(zip, path));
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

  /** The member's bytes as stored (compressed), for copying it into another zip unchanged. */
  async readRaw(name: string): Promise<Buffer> {
    const entry = this.entryOrThrow(name);
    return collect(await this.stream(entry, false), this.path, name);
  }

  /** The member's uncompressed bytes, CRC-checked. */
  async read(name: string): Promise<Buffer> {
    const entry = this.entryOrThrow(name);
    let data: Buffer;
    switch (entry.compressionMethod) {
      case METHOD_STORED:
      case METHOD_DEFLATE:
        data = await collect(await this.stream(entry, true), this.path, name);
        break;
      case METHOD_ZSTD:
        if (!zstdDecompress) {
          throw new ZipFormatError(
            `${this.path}: member ${name} is zstd-compressed (Inspect's default since it switched from DEFLATE); ` +
              `this Node (${process.version}) has no zstd. Use Node >= 22.15, or rewrite the log with DEFLATE.`,
          );
        }
        data = await promisify(zstdDecompress)(await this.readRaw(name));
        break;
      default:
        throw new ZipFormatError(`${this.path}: member ${name} uses unsupported compression method ${entry.compressionMethod}`);
    }
    if (data.length !== entry.uncompressedSize || crc32(data) !== entry.crc32) {
      throw new ZipFormatError(`${this.path}: member ${name} is corrupt (size or CRC mismatch)`);
    }
    return data;
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

  private stream(entry: yauzl.Entry, decode: boolean): Promise<Readable> {
    // yauzl's defaults decode (inflate); `decodeFileData: false` gives the stored bytes.
    return wrap(this.path, (done) => this.zip.openReadStream(entry, decode ? {} : { decodeFileData: false }, done));
  }
}

/** Opens `path`, runs `fn`, and closes the file whatever happens. */
export async function withZipReader<T>(path: string, fn: (zip: ZipReader) => Promise<T>): Promise<T> {
  const zip = await ZipReader.open(path);
  try {
    return await fn(zip);
  } finally {
    await zip.close();
  }
}

/** Entries read up front (lazily, one at a time); the file stays open until `close`. */
const OPTIONS: yauzl.Options = { lazyEntries: true, autoClose: false, strictFileNames: false, validateEntrySizes: true };

function readEntries(zip: yauzl.ZipFile, path: string): Promise<Map<string, yauzl.Entry>> {
  return new Promise((resolve, reject) => {
    const byName = new Map<string, yauzl.Entry>();
    zip.on('entry', (entry: yauzl.Entry) => {
      byName.set(entry.fileName, entry);
      zip.readEntry();
    });
    zip.once('end', () => resolve(byName));
    zip.once('error', (err: Error) => reject(formatError(path, err)));
    zip.readEntry();
  });
}

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
  const incomplete = /end of central directory record signature not found/i.test(err.message);
  return new ZipFormatError(
    incomplete
      ? `${path} is not a complete zip (no end of central directory record): it may be being written, or its writer stopped mid-write`
      : `${path}: ${err.message}`,
    { cause: err },
  );
}
