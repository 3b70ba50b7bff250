/**
 * A zip file that grows by appending members, and is a complete, valid zip after every append.
 *
 * Hand-written because no zip library offers append-with-rewrite of the central directory: yazl
 * and fflate stream a whole archive once, and rewriting the archive on every flush (what Inspect
 * does, through a temp file) costs O(size) per flush and O(size^2) per run. Here each append
 * writes, in one positional write starting where the old central directory began:
 *
 *   [new local headers + data][central directory: old records + new][end record]
 *
 * so the old directory is overwritten by the new members and the file ends with a fresh one.
 * Members are stored with sizes and CRC in the local header (no data descriptors), which every
 * reader accepts. A member appended under an existing name replaces it in the directory (its old
 * bytes stay as dead space), the rule Inspect's readers apply to duplicate names.
 *
 * ZIP64: offsets and the member count may pass the 32-bit limits (a ZIP64 extra field carries a
 * member's offset, and a ZIP64 end record the directory's size, offset and count). A single
 * member of 4 GiB or more is refused.
 *
 * Durability: a reader that opens the file during an append may see a torn tail and should retry;
 * a crash during an append leaves the members written before it but no directory. `sync()` makes
 * an append durable.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';
import {
  CENTRAL_HEADER_SIGNATURE,
  CENTRAL_HEADER_SIZE,
  EOCD_SIGNATURE,
  EOCD_SIZE,
  FLAG_UTF8_NAME,
  LOCAL_HEADER_SIGNATURE,
  LOCAL_HEADER_SIZE,
  METHOD_DEFLATE,
  U16_SENTINEL,
  U32_SENTINEL,
  ZIP64_EOCD_SIGNATURE,
  ZIP64_EOCD_SIZE,
  ZIP64_EXTRA_ID,
  ZIP64_LOCATOR_SIGNATURE,
  ZIP64_LOCATOR_SIZE,
  crc32,
  dosDateTime,
  type ZipEntry,
} from './zip-format.js';

const deflateRaw = promisify(zlib.deflateRaw);

/** Version 2.0 (deflate) and 4.5 (ZIP64), made on Unix (high byte 3). */
const VERSION_DEFLATE = 20;
const VERSION_ZIP64 = 45;
const MADE_BY_UNIX = 3 << 8;
/** A regular file, rw-r--r--. */
const EXTERNAL_ATTRS = (0o100644 << 16) >>> 0;
/** zlib's default, the level Python's zipfile uses for DEFLATE. */
const DEFLATE_LEVEL = 6;

/** A member compressed and ready to append. */
export interface PreparedEntry {
  name: string;
  data: Uint8Array;
  crc32: number;
  uncompressedSize: number;
  method: number;
}

/** Compresses a member with DEFLATE (on the libuv thread pool, off the event loop). */
export async function prepareZipEntry(name: string, content: string | Uint8Array): Promise<PreparedEntry> {
  const raw = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  if (raw.length >= U32_SENTINEL) throw new ZipLimitError(`zip member ${name} is ${raw.length} bytes; members must be under 4 GiB`);
  const data = await deflateRaw(raw, { level: DEFLATE_LEVEL });
  return { name, data, crc32: crc32(raw), uncompressedSize: raw.length, method: METHOD_DEFLATE };
}

export class ZipLimitError extends Error {
  override readonly name = 'ZipLimitError';
}

export interface ZipAppenderOptions {
  /**
   * Where the first member starts (default 0). The bytes before it are left as a hole: readers
   * find members through the central directory. Lets tests reach ZIP64 offsets without writing
   * 4 GiB.
   */
  firstEntryOffset?: number;
}

export class ZipAppender {
  /** Directory records in file order; one per name. */
  private entries: ZipEntry[] = [];
  private failure: Error | undefined;

  private constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    /** Where the central directory starts, i.e. where the next member goes. */
    private directoryOffset: number,
    private fileSize: number,
  ) {}

  /** Creates a new zip (failing if `path` exists) holding no members. */
  static async create(path: string, options: ZipAppenderOptions = {}): Promise<ZipAppender> {
    const handle = await open(path, 'wx');
    const offset = options.firstEntryOffset ?? 0;
    const appender = new ZipAppender(path, handle, offset, offset);
    try {
      await appender.append([]);
    } catch (err) {
      await handle.close();
      throw err;
    }
    return appender;
  }

  /** Members currently in the directory, in file order. */
  get members(): readonly ZipEntry[] {
    return this.entries;
  }

  /** Bytes in the file. */
  get size(): number {
    return this.fileSize;
  }

  /** Appends members and rewrites the directory after them, in one write. */
  async append(prepared: readonly PreparedEntry[]): Promise<void> {
    if (this.failure) throw new Error(`zip ${this.path} is unusable after an earlier write failed`, { cause: this.failure });
    const { dosTime, dosDate } = dosDateTime(new Date());
    const added: ZipEntry[] = [];
    const chunks: Uint8Array[] = [];
    let position = this.directoryOffset;
    for (const entry of prepared) {
      if (entry.data.length >= U32_SENTINEL || entry.uncompressedSize >= U32_SENTINEL) {
        throw new ZipLimitError(`zip member ${entry.name} is 4 GiB or more; ZIP64 member sizes are not supported`);
      }
      const name = Buffer.from(entry.name, 'utf8');
      if (name.length > U16_SENTINEL) throw new ZipLimitError(`zip member name too long: ${entry.name.slice(0, 80)}...`);
      const record: ZipEntry = {
        name: entry.name,
        method: entry.method,
        flags: isAscii(entry.name) ? 0 : FLAG_UTF8_NAME,
        crc32: entry.crc32,
        compressedSize: entry.data.length,
        uncompressedSize: entry.uncompressedSize,
        localHeaderOffset: position,
        dosTime,
        dosDate,
      };
      const header = localHeader(record, name);
      chunks.push(header, entry.data);
      position += header.length + entry.data.length;
      added.push(record);
    }

    const nextEntries = this.mergedEntries(added);
    const directoryStart = position;
    const directory = centralDirectory(nextEntries);
    chunks.push(directory);
    position += directory.length;
    chunks.push(endRecords(nextEntries.length, directory.length, directoryStart, position));

    const buffer = Buffer.concat(chunks);
    try {
      await writeFully(this.handle, buffer, this.directoryOffset);
      const end = this.directoryOffset + buffer.length;
      if (end < this.fileSize) await this.handle.truncate(end);
      this.fileSize = end;
    } catch (err) {
      this.failure = err as Error;
      throw err;
    }
    this.directoryOffset = directoryStart;
    this.entries = nextEntries;
  }

  /** fsync: what has been appended survives a crash. */
  async sync(): Promise<void> {
    await this.handle.sync();
  }

  async close(): Promise<void> {
    await this.handle.close();
  }

  private mergedEntries(added: ZipEntry[]): ZipEntry[] {
    const replaced = new Set(added.map((e) => e.name));
    const kept = this.entries.filter((e) => !replaced.has(e.name));
    // Within one append a later member of the same name wins too.
    const last = new Map(added.map((e) => [e.name, e] as const));
    return [...kept, ...added.filter((e) => last.get(e.name) === e)];
  }
}

function localHeader(entry: ZipEntry, name: Buffer): Buffer {
  const header = Buffer.alloc(LOCAL_HEADER_SIZE + name.length);
  header.writeUInt32LE(LOCAL_HEADER_SIGNATURE, 0);
  header.writeUInt16LE(VERSION_DEFLATE, 4);
  header.writeUInt16LE(entry.flags, 6);
  header.writeUInt16LE(entry.method, 8);
  header.writeUInt16LE(entry.dosTime, 10);
  header.writeUInt16LE(entry.dosDate, 12);
  header.writeUInt32LE(entry.crc32, 14);
  header.writeUInt32LE(entry.compressedSize, 18);
  header.writeUInt32LE(entry.uncompressedSize, 22);
  header.writeUInt16LE(name.length, 26);
  header.writeUInt16LE(0, 28);
  name.copy(header, LOCAL_HEADER_SIZE);
  return header;
}

function centralDirectory(entries: readonly ZipEntry[]): Buffer {
  const records: Buffer[] = [];
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const zip64Offset = entry.localHeaderOffset >= U32_SENTINEL;
    const extraLength = zip64Offset ? 12 : 0;
    const record = Buffer.alloc(CENTRAL_HEADER_SIZE + name.length + extraLength);
    const version = zip64Offset ? VERSION_ZIP64 : VERSION_DEFLATE;
    record.writeUInt32LE(CENTRAL_HEADER_SIGNATURE, 0);
    record.writeUInt16LE(MADE_BY_UNIX | version, 4);
    record.writeUInt16LE(version, 6);
    record.writeUInt16LE(entry.flags, 8);
    record.writeUInt16LE(entry.method, 10);
    record.writeUInt16LE(entry.dosTime, 12);
    record.writeUInt16LE(entry.dosDate, 14);
    record.writeUInt32LE(entry.crc32, 16);
    record.writeUInt32LE(entry.compressedSize, 20);
    record.writeUInt32LE(entry.uncompressedSize, 24);
    record.writeUInt16LE(name.length, 28);
    record.writeUInt16LE(extraLength, 30);
    record.writeUInt16LE(0, 32); // comment length
    record.writeUInt16LE(0, 34); // disk number
    record.writeUInt16LE(0, 36); // internal attributes
    record.writeUInt32LE(EXTERNAL_ATTRS, 38);
    record.writeUInt32LE(zip64Offset ? U32_SENTINEL : entry.localHeaderOffset, 42);
    name.copy(record, CENTRAL_HEADER_SIZE);
    if (zip64Offset) {
      const at = CENTRAL_HEADER_SIZE + name.length;
      record.writeUInt16LE(ZIP64_EXTRA_ID, at);
      record.writeUInt16LE(8, at + 2);
      record.writeBigUInt64LE(BigInt(entry.localHeaderOffset), at + 4);
    }
    records.push(record);
  }
  return Buffer.concat(records);
}

/**
 * The end record, preceded by the ZIP64 end record and locator when a value passes 32 bits. Then
 * every 32-bit field holds its sentinel: the viewer of `inspect view` looks for the ZIP64 records
 * only when the directory offset or size is a sentinel.
 */
function endRecords(count: number, directorySize: number, directoryOffset: number, zip64EndOffset: number): Buffer {
  const zip64 = count >= U16_SENTINEL || directorySize >= U32_SENTINEL || directoryOffset >= U32_SENTINEL;
  const end = Buffer.alloc(EOCD_SIZE);
  end.writeUInt32LE(EOCD_SIGNATURE, 0);
  end.writeUInt16LE(0, 4); // this disk
  end.writeUInt16LE(0, 6); // disk where the directory starts
  end.writeUInt16LE(zip64 ? U16_SENTINEL : count, 8);
  end.writeUInt16LE(zip64 ? U16_SENTINEL : count, 10);
  end.writeUInt32LE(zip64 ? U32_SENTINEL : directorySize, 12);
  end.writeUInt32LE(zip64 ? U32_SENTINEL : directoryOffset, 16);
  end.writeUInt16LE(0, 20); // comment length
  if (!zip64) return end;

  const record = Buffer.alloc(ZIP64_EOCD_SIZE);
  record.writeUInt32LE(ZIP64_EOCD_SIGNATURE, 0);
  record.writeBigUInt64LE(BigInt(ZIP64_EOCD_SIZE - 12), 4); // size of the rest of the record
  record.writeUInt16LE(MADE_BY_UNIX | VERSION_ZIP64, 12);
  record.writeUInt16LE(VERSION_ZIP64, 14);
  record.writeUInt32LE(0, 16); // this disk
  record.writeUInt32LE(0, 20); // disk where the directory starts
  record.writeBigUInt64LE(BigInt(count), 24);
  record.writeBigUInt64LE(BigInt(count), 32);
  record.writeBigUInt64LE(BigInt(directorySize), 40);
  record.writeBigUInt64LE(BigInt(directoryOffset), 48);

  const locator = Buffer.alloc(ZIP64_LOCATOR_SIZE);
  locator.writeUInt32LE(ZIP64_LOCATOR_SIGNATURE, 0);
  locator.writeUInt32LE(0, 4); // disk holding the ZIP64 end record
  locator.writeBigUInt64LE(BigInt(zip64EndOffset), 8);
  locator.writeUInt32LE(1, 16); // total disks
  return Buffer.concat([record, locator, end]);
}

async function writeFully(handle: FileHandle, buffer: Uint8Array, position: number): Promise<void> {
  let written = 0;
  while (written < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, written, buffer.length - written, position + written);
    if (bytesWritten === 0) throw new Error('zip write made no progress');
    written += bytesWritten;
  }
}

function isAscii(s: string): boolean {
  return /^[\x00-\x7f]*$/.test(s);
}
