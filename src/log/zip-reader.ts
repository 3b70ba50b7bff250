/**
 * Random-access reading of a zip file: the central directory once, then one member at a time.
 *
 * fflate's `unzip` needs the whole archive in memory; logs reach gigabytes, and a header-only read
 * or a one-sample read should touch a few kilobytes. So the directory is parsed here (with its
 * ZIP64 forms) and members are inflated with node's zlib.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import {
  CENTRAL_HEADER_SIGNATURE,
  CENTRAL_HEADER_SIZE,
  EOCD_SIGNATURE,
  EOCD_SIZE,
  LOCAL_HEADER_SIGNATURE,
  LOCAL_HEADER_SIZE,
  MAX_EOCD_SEARCH,
  METHOD_DEFLATE,
  METHOD_STORED,
  METHOD_ZSTD,
  U16_SENTINEL,
  U32_SENTINEL,
  ZIP64_EOCD_SIGNATURE,
  ZIP64_EOCD_SIZE,
  ZIP64_EXTRA_ID,
  ZIP64_LOCATOR_SIGNATURE,
  ZIP64_LOCATOR_SIZE,
  crc32,
  type ZipEntry,
} from './zip-format.js';

const inflateRaw = promisify(zlib.inflateRaw);
/** Present from Node 22.15 / 23.8; Node 20 cannot read zstd members. */
const zstdDecompress = (zlib as { zstdDecompress?: typeof zlib.inflateRaw }).zstdDecompress;

export class ZipFormatError extends Error {
  override readonly name = 'ZipFormatError';
}

export class ZipReader {
  private readonly byName: Map<string, ZipEntry>;

  private constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    /** Directory records in file order (a repeated name appears each time). */
    readonly entries: readonly ZipEntry[],
  ) {
    // A name written twice resolves to its last record, as in Python's zipfile and Inspect's readers.
    this.byName = new Map(entries.map((e) => [e.name, e] as const));
  }

  static async open(path: string): Promise<ZipReader> {
    const handle = await open(path, 'r');
    try {
      const entries = await readCentralDirectory(handle, path);
      return new ZipReader(path, handle, entries);
    } catch (err) {
      await handle.close();
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

  /** The member's uncompressed bytes, CRC-checked. */
  async read(name: string): Promise<Buffer> {
    const entry = this.byName.get(name);
    if (!entry) throw new ZipFormatError(`${this.path} has no member ${name}`);
    const header = await readExactly(this.handle, entry.localHeaderOffset, LOCAL_HEADER_SIZE, this.path);
    if (header.readUInt32LE(0) !== LOCAL_HEADER_SIGNATURE) {
      throw new ZipFormatError(`${this.path}: member ${name} has no local header at ${entry.localHeaderOffset}`);
    }
    const dataOffset = entry.localHeaderOffset + LOCAL_HEADER_SIZE + header.readUInt16LE(26) + header.readUInt16LE(28);
    const raw = await readExactly(this.handle, dataOffset, entry.compressedSize, this.path);
    const data = await decompress(raw, entry, this.path);
    if (data.length !== entry.uncompressedSize || crc32(data) !== entry.crc32) {
      throw new ZipFormatError(`${this.path}: member ${name} is corrupt (size or CRC mismatch)`);
    }
    return data;
  }

  async readText(name: string): Promise<string> {
    return (await this.read(name)).toString('utf8');
  }

  async close(): Promise<void> {
    await this.handle.close();
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

async function decompress(raw: Buffer, entry: ZipEntry, path: string): Promise<Buffer> {
  switch (entry.method) {
    case METHOD_STORED:
      return raw;
    case METHOD_DEFLATE:
      return inflateRaw(raw);
    case METHOD_ZSTD:
      if (!zstdDecompress) {
        throw new ZipFormatError(
          `${path}: member ${entry.name} is zstd-compressed (Inspect's default since it switched from DEFLATE); ` +
            `this Node (${process.version}) has no zstd. Use Node >= 22.15, or rewrite the log with DEFLATE.`,
        );
      }
      return promisify(zstdDecompress)(raw);
    default:
      throw new ZipFormatError(`${path}: member ${entry.name} uses unsupported compression method ${entry.method}`);
  }
}

async function readCentralDirectory(handle: FileHandle, path: string): Promise<ZipEntry[]> {
  const { size } = await handle.stat();
  if (size < EOCD_SIZE) throw new ZipFormatError(`${path} is not a zip (${size} bytes)`);
  const tailLength = Math.min(size, MAX_EOCD_SEARCH);
  const tailStart = size - tailLength;
  const tail = await readExactly(handle, tailStart, tailLength, path);
  const eocd = findEndRecord(tail);
  if (eocd < 0) {
    throw new ZipFormatError(
      `${path} is not a complete zip (no end of central directory record): it may be being written, or its writer stopped mid-write`,
    );
  }

  let count = tail.readUInt16LE(eocd + 10);
  let directorySize = tail.readUInt32LE(eocd + 12);
  let directoryOffset = tail.readUInt32LE(eocd + 16);
  const needsZip64 = count === U16_SENTINEL || directorySize === U32_SENTINEL || directoryOffset === U32_SENTINEL;
  const locator = eocd - ZIP64_LOCATOR_SIZE;
  if (needsZip64 && locator >= 0 && tail.readUInt32LE(locator) === ZIP64_LOCATOR_SIGNATURE) {
    const recordOffset = Number(tail.readBigUInt64LE(locator + 8));
    const record = await readExactly(handle, recordOffset, ZIP64_EOCD_SIZE, path);
    if (record.readUInt32LE(0) !== ZIP64_EOCD_SIGNATURE) throw new ZipFormatError(`${path}: corrupt ZIP64 end record`);
    count = Number(record.readBigUInt64LE(32));
    directorySize = Number(record.readBigUInt64LE(40));
    directoryOffset = Number(record.readBigUInt64LE(48));
  }
  if (directoryOffset + directorySize > size) throw new ZipFormatError(`${path}: central directory lies outside the file`);

  const directory = await readExactly(handle, directoryOffset, directorySize, path);
  const entries: ZipEntry[] = [];
  let at = 0;
  while (at + CENTRAL_HEADER_SIZE <= directory.length && directory.readUInt32LE(at) === CENTRAL_HEADER_SIGNATURE) {
    const nameLength = directory.readUInt16LE(at + 28);
    const extraLength = directory.readUInt16LE(at + 30);
    const commentLength = directory.readUInt16LE(at + 32);
    const flags = directory.readUInt16LE(at + 8);
    const nameBytes = directory.subarray(at + CENTRAL_HEADER_SIZE, at + CENTRAL_HEADER_SIZE + nameLength);
    const entry: ZipEntry = {
      name: nameBytes.toString('utf8'),
      flags,
      method: directory.readUInt16LE(at + 10),
      dosTime: directory.readUInt16LE(at + 12),
      dosDate: directory.readUInt16LE(at + 14),
      crc32: directory.readUInt32LE(at + 16),
      compressedSize: directory.readUInt32LE(at + 20),
      uncompressedSize: directory.readUInt32LE(at + 24),
      localHeaderOffset: directory.readUInt32LE(at + 42),
    };
    const extra = directory.subarray(at + CENTRAL_HEADER_SIZE + nameLength, at + CENTRAL_HEADER_SIZE + nameLength + extraLength);
    applyZip64Extra(entry, extra);
    entries.push(entry);
    at += CENTRAL_HEADER_SIZE + nameLength + extraLength + commentLength;
  }
  if (entries.length !== count) {
    throw new ZipFormatError(`${path}: central directory lists ${entries.length} members, end record says ${count}`);
  }
  return entries;
}

/** The last end record whose comment length reaches exactly to the end of the file. */
function findEndRecord(tail: Buffer): number {
  for (let i = tail.length - EOCD_SIZE; i >= 0; i--) {
    if (tail.readUInt32LE(i) === EOCD_SIGNATURE && i + EOCD_SIZE + tail.readUInt16LE(i + 20) === tail.length) return i;
  }
  return -1;
}

/** Fields that overflowed 32 bits are in the ZIP64 extra field, in this order. */
function applyZip64Extra(entry: ZipEntry, extra: Buffer): void {
  const wanted = [
    entry.uncompressedSize === U32_SENTINEL,
    entry.compressedSize === U32_SENTINEL,
    entry.localHeaderOffset === U32_SENTINEL,
  ];
  if (!wanted.some(Boolean)) return;
  for (let at = 0; at + 4 <= extra.length; ) {
    const id = extra.readUInt16LE(at);
    const length = extra.readUInt16LE(at + 2);
    if (id === ZIP64_EXTRA_ID) {
      let field = at + 4;
      const next = (): number => {
        const value = Number(extra.readBigUInt64LE(field));
        field += 8;
        return value;
      };
      if (wanted[0]) entry.uncompressedSize = next();
      if (wanted[1]) entry.compressedSize = next();
      if (wanted[2]) entry.localHeaderOffset = next();
      return;
    }
    at += 4 + length;
  }
  throw new ZipFormatError(`member ${entry.name} needs a ZIP64 extra field and has none`);
}

async function readExactly(handle: FileHandle, position: number, length: number, path: string): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, done, length - done, position + done);
    if (bytesRead === 0) throw new ZipFormatError(`${path} ends before byte ${position + length}`);
    done += bytesRead;
  }
  return buffer;
}
