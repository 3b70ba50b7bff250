/**
 * A zip file that grows by appending members, readable as a complete zip at every directory
 * checkpoint, at a cost per appended member that does not grow with the members already written.
 *
 * Hand-written because no zip library offers append-in-place with a live central directory: yazl
 * and fflate stream a whole archive once, and rewriting the archive on every flush (what Inspect
 * does, through a temp file) costs O(size) per flush and O(size^2) per run.
 *
 * Layout while open:
 *
 *   [members][gap: room for more members][central directory][end records]
 *                ^ fill                  ^ directoryOffset             ^ size (EOF)
 *
 * `appendMembers` writes members into the gap, never touching the directory on disk, so the file
 * stays the complete zip of the last checkpoint (the bytes in the gap are dead space that readers
 * never reach: they find members through the directory). `writeDirectory` (a checkpoint) writes
 * the directory of every member so far, in one positional write that ends at or past the old end
 * of file: either over the old directory (when the gap has room left) or further on after a fresh
 * gap. The gap is sized from the directory (at least 1 MiB, at least twice the directory), so
 * moving the directory happens at a rate that amortises its O(members) cost to O(1) per member.
 * A move is itself a checkpoint of the members written before it. The caller decides how often to
 * checkpoint (the eval writer does it at a bounded rate); each
 * checkpoint costs O(members), so a fixed-interval checkpoint is cheap per member at any size.
 *
 * Why it is crash-safe: every write either lands in dead space (members into the gap) or replaces
 * the file's tail with a new directory and end record in one write reaching the new end of file.
 * So a killed writer leaves the zip of its last checkpoint; members written after it are lost to
 * readers. A write can be cut short only by a fatal signal (SIGKILL), and then keeps a prefix: a
 * checkpoint over the old directory is still safe, since the new directory begins with the old
 * one's records byte for byte (records are only appended) and the old end record stays last; a
 * move past the end of file is not (its torn tail has no end record), but moves are rare (when the
 * gap fills: a few per megabyte of members at first, then geometrically fewer) and small (the
 * directory only). The former design rewrote the directory over itself after every member, with
 * the same exposure on every write.
 * `finish` compacts: the last members and directory go right after the last member, and the file
 * is truncated (when that fits before the old directory, which is intact until the truncate) or
 * padded to reach the old end of file (dead bytes at most the old directory's size).
 *
 * `append` (members, then a checkpoint) keeps the simple contract: a complete zip after each call.
 * Members are stored with sizes and CRC in the local header (no data descriptors), which every
 * reader accepts. A member appended under an existing name replaces it in the directory (its old
 * bytes stay as dead space), the rule Inspect's readers apply to duplicate names.
 *
 * ZIP64: offsets and the member count may pass the 32-bit limits (a ZIP64 extra field carries a
 * member's offset, and a ZIP64 end record the directory's size, offset and count). A single
 * member of 4 GiB or more is refused. `sync()` makes what is written durable (power loss).
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
const inflateRaw = promisify(zlib.inflateRaw);

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

/**
 * Compresses a member given as chunks (streamed through DEFLATE, so only the compressed bytes are
 * held), for members too large to build as one string.
 */
export async function prepareZipEntryFromChunks(name: string, chunks: AsyncIterable<Uint8Array>): Promise<PreparedEntry> {
  const deflate = zlib.createDeflateRaw({ level: DEFLATE_LEVEL });
  const out: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => out.push(chunk));
  const ended = new Promise<void>((resolve, reject) => {
    deflate.on('end', resolve);
    deflate.on('error', reject);
  });
  let crc = 0;
  let size = 0;
  for await (const chunk of chunks) {
    crc = crc32(chunk, crc);
    size += chunk.length;
    if (size >= U32_SENTINEL) throw new ZipLimitError(`zip member ${name} is 4 GiB or more; members must be under 4 GiB`);
    if (!deflate.write(chunk)) await new Promise((resolve) => deflate.once('drain', resolve));
  }
  deflate.end();
  await ended;
  return { name, data: Buffer.concat(out), crc32: crc, uncompressedSize: size, method: METHOD_DEFLATE };
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

/** The smallest gap left for members before the directory (1 MiB); see the top of this file. */
const MIN_GAP = 1024 * 1024;
/** The gap is at least this many times the directory's size, so moves amortise to O(1). */
const GAP_PER_DIRECTORY_BYTE = 2;

export class ZipAppender {
  /** The encoded central directory records of the live members, in file order. */
  private directory = Buffer.alloc(4096);
  private directoryLength = 0;
  /** Member name -> where its record starts in `directory`. */
  private readonly records = new Map<string, number>();
  private failure: Error | undefined;
  private written = 0;

  private constructor(
    readonly path: string,
    private readonly handle: FileHandle,
    /** Where the next member goes: the end of the last member. */
    private fill: number,
    /** Where the directory on disk starts. */
    private directoryOffset: number,
    private fileSize: number,
  ) {}

  /** Creates a new zip (failing if `path` exists) holding no members. */
  static async create(path: string, options: ZipAppenderOptions = {}): Promise<ZipAppender> {
    const handle = await open(path, 'wx+');
    const offset = options.firstEntryOffset ?? 0;
    const appender = new ZipAppender(path, handle, offset, offset, offset);
    try {
      await appender.writeDirectory();
    } catch (err) {
      await handle.close();
      throw err;
    }
    return appender;
  }

  /** Members in the directory (the next checkpoint's), in file order. Decoded on demand. */
  get members(): ZipEntry[] {
    const out: ZipEntry[] = [];
    for (let at = 0; at < this.directoryLength; ) {
      const d = this.directory;
      const nameLength = d.readUInt16LE(at + 28);
      const extraLength = d.readUInt16LE(at + 30);
      const offset = d.readUInt32LE(at + 42);
      out.push({
        name: d.toString('utf8', at + CENTRAL_HEADER_SIZE, at + CENTRAL_HEADER_SIZE + nameLength),
        flags: d.readUInt16LE(at + 8),
        method: d.readUInt16LE(at + 10),
        dosTime: d.readUInt16LE(at + 12),
        dosDate: d.readUInt16LE(at + 14),
        crc32: d.readUInt32LE(at + 16),
        compressedSize: d.readUInt32LE(at + 20),
        uncompressedSize: d.readUInt32LE(at + 24),
        localHeaderOffset: offset === U32_SENTINEL ? Number(d.readBigUInt64LE(at + CENTRAL_HEADER_SIZE + nameLength + 4)) : offset,
      });
      at += CENTRAL_HEADER_SIZE + nameLength + extraLength;
    }
    return out;
  }

  /** Members in the directory. */
  get count(): number {
    return this.records.size;
  }

  /** Bytes in the file. */
  get size(): number {
    return this.fileSize;
  }

  /** Members appended since the last checkpoint (not yet visible to readers). */
  get pending(): number {
    return this.written;
  }

  /** Appends members and writes a directory checkpoint: a complete zip when this resolves. */
  async append(prepared: readonly PreparedEntry[]): Promise<void> {
    await this.appendMembers(prepared);
    await this.writeDirectory();
  }

  /**
   * Writes members into the gap before the directory; readers see them at the next checkpoint.
   * When the gap is too small, the directory (of the members before these) moves first, past the
   * end of file, leaving a fresh gap.
   */
  async appendMembers(prepared: readonly PreparedEntry[]): Promise<void> {
    if (prepared.length === 0) return;
    const { bytes, records } = this.encodeMembers(prepared, this.fill);
    if (this.fill + bytes.length > this.directoryOffset) {
      const gap = Math.max(MIN_GAP, GAP_PER_DIRECTORY_BYTE * this.directoryLength, bytes.length);
      await this.checkpointAt(Math.max(this.fill + bytes.length + gap, this.fileSize), this.directoryBytes());
    }
    await this.guarded(() => writeFully(this.handle, bytes, this.fill));
    this.fill += bytes.length;
    for (const record of records) this.addRecord(record);
    this.written += prepared.length;
  }

  /**
   * A checkpoint: writes the directory of every member appended so far, in one write ending at
   * or past the end of file, over the old directory when the gap has room, else past the end
   * after a fresh gap.
   */
  async writeDirectory(): Promise<void> {
    const directory = this.directoryBytes();
    const room = this.directoryOffset - this.fill;
    const gap = Math.max(MIN_GAP, GAP_PER_DIRECTORY_BYTE * directory.length);
    if (room < gap / 4) {
      await this.checkpointAt(Math.max(this.fill + gap, this.fileSize), directory);
      return;
    }
    // Over the old directory; moved later when shorter, so that the write still reaches the end of file.
    let at = this.directoryOffset;
    const total = directory.length + endRecordsLength(this.records.size, directory.length, at);
    if (at + total < this.fileSize) at = this.fileSize - total;
    await this.checkpointAt(at, directory);
  }

  /**
   * Appends the last members and the directory right after the last member, leaving no gap.
   * Crash-safe as above: the write is truncated afterwards only when it ended before the old
   * directory (which stays intact and last until the truncate); otherwise it is padded with dead
   * bytes to reach the old end of file, and replaces the tail in one write.
   */
  async finish(prepared: readonly PreparedEntry[]): Promise<void> {
    const { bytes, records } = this.encodeMembers(prepared, this.fill);
    for (const record of records) this.addRecord(record);
    const directory = this.directoryBytes();
    let directoryStart = this.fill + bytes.length;
    const compactEnd = directoryStart + directory.length + endRecordsLength(this.records.size, directory.length, directoryStart);
    const truncate = compactEnd <= this.directoryOffset;
    if (!truncate && compactEnd < this.fileSize) directoryStart += this.fileSize - compactEnd;
    const end = endRecords(this.records.size, directory.length, directoryStart, directoryStart + directory.length);
    const padding = directoryStart - (this.fill + bytes.length);
    const parts = [bytes, Buffer.alloc(padding), directory, end];
    await this.guarded(async () => {
      await writeFully(this.handle, parts, this.fill);
      const fileEnd = this.fill + parts.reduce((n, p) => n + p.length, 0);
      if (fileEnd < this.fileSize) await this.handle.truncate(fileEnd);
      this.fileSize = fileEnd;
    });
    this.fill += bytes.length + padding;
    this.directoryOffset = directoryStart;
    this.written = 0;
  }

  /** The uncompressed bytes of a member this appender wrote (DEFLATE or stored). */
  async readMember(name: string): Promise<Buffer> {
    const at = this.records.get(name);
    if (at === undefined) throw new Error(`zip ${this.path} has no member ${name}`);
    const d = this.directory;
    const method = d.readUInt16LE(at + 10);
    const compressedSize = d.readUInt32LE(at + 20);
    const nameLength = d.readUInt16LE(at + 28);
    const raw32 = d.readUInt32LE(at + 42);
    const offset = raw32 === U32_SENTINEL ? Number(d.readBigUInt64LE(at + CENTRAL_HEADER_SIZE + nameLength + 4)) : raw32;
    // Local headers written here carry no extra field: the data follows the name.
    const data = Buffer.alloc(compressedSize);
    const { bytesRead } = await this.handle.read(data, 0, compressedSize, offset + LOCAL_HEADER_SIZE + nameLength);
    if (bytesRead !== compressedSize) throw new Error(`zip ${this.path}: member ${name} is cut short`);
    return method === METHOD_DEFLATE ? inflateRaw(data) : data;
  }

  /** fsync: what has been written survives a power loss. */
  async sync(): Promise<void> {
    await this.handle.sync();
  }

  async close(): Promise<void> {
    await this.handle.close();
  }

  private async checkpointAt(at: number, directory: Buffer): Promise<void> {
    const end = endRecords(this.records.size, directory.length, at, at + directory.length);
    const length = directory.length + end.length;
    await this.guarded(async () => {
      await writeFully(this.handle, [directory, end], at);
      // Only a replacement of members can make the directory shorter than the tail it replaces.
      if (at + length < this.fileSize) await this.handle.truncate(at + length);
    });
    this.directoryOffset = at;
    this.fileSize = at + length;
    this.written = 0;
  }

  private async guarded(write: () => Promise<void>): Promise<void> {
    if (this.failure) throw new Error(`zip ${this.path} is unusable after an earlier write failed`, { cause: this.failure });
    try {
      await write();
    } catch (err) {
      this.failure = err as Error;
      throw err;
    }
  }

  /** A view, not a copy (a copy per checkpoint is megabytes of garbage at 100,000 members). */
  private directoryBytes(): Buffer {
    return this.directory.subarray(0, this.directoryLength);
  }

  private encodeMembers(prepared: readonly PreparedEntry[], start: number): { bytes: Buffer; records: Array<{ name: string; record: Buffer }> } {
    if (this.failure) throw new Error(`zip ${this.path} is unusable after an earlier write failed`, { cause: this.failure });
    const { dosTime, dosDate } = dosDateTime(new Date());
    const chunks: Uint8Array[] = [];
    const records: Array<{ name: string; record: Buffer }> = [];
    let position = start;
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
      records.push({ name: entry.name, record: centralRecord(record, name) });
    }
    return { bytes: Buffer.concat(chunks), records };
  }

  /** Adds a record at the end of the directory; a record of the same name is removed (O(members), rare). */
  private addRecord({ name, record }: { name: string; record: Buffer }): void {
    const old = this.records.get(name);
    if (old !== undefined) {
      const length = recordLength(this.directory, old);
      this.directory.copyWithin(old, old + length, this.directoryLength);
      this.directoryLength -= length;
      for (const [key, at] of this.records) if (at > old) this.records.set(key, at - length);
      this.records.delete(name);
    }
    if (this.directoryLength + record.length > this.directory.length) {
      const grown = Buffer.alloc(Math.max(this.directory.length * 2, this.directoryLength + record.length));
      this.directory.copy(grown, 0, 0, this.directoryLength);
      this.directory = grown;
    }
    record.copy(this.directory, this.directoryLength);
    this.records.set(name, this.directoryLength);
    this.directoryLength += record.length;
  }
}

/** The most the end records take (ZIP64 end record, locator and end record). */
const END_RECORDS_MAX = ZIP64_EOCD_SIZE + ZIP64_LOCATOR_SIZE + EOCD_SIZE;

function recordLength(directory: Buffer, at: number): number {
  return CENTRAL_HEADER_SIZE + directory.readUInt16LE(at + 28) + directory.readUInt16LE(at + 30) + directory.readUInt16LE(at + 32);
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

function centralRecord(entry: ZipEntry, name: Buffer): Buffer {
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
  return record;
}

function needsZip64(count: number, directorySize: number, directoryOffset: number): boolean {
  return count >= U16_SENTINEL || directorySize >= U32_SENTINEL || directoryOffset >= U32_SENTINEL;
}

function endRecordsLength(count: number, directorySize: number, directoryOffset: number): number {
  return needsZip64(count, directorySize, directoryOffset) ? END_RECORDS_MAX : EOCD_SIZE;
}

/**
 * The end record, preceded by the ZIP64 end record and locator when a value passes 32 bits. Then
 * every 32-bit field holds its sentinel: the viewer of `inspect view` looks for the ZIP64 records
 * only when the directory offset or size is a sentinel.
 */
function endRecords(count: number, directorySize: number, directoryOffset: number, zip64EndOffset: number): Buffer {
  const zip64 = needsZip64(count, directorySize, directoryOffset);
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

/** Writes the parts in order from `position`, in one positional write (see the top of this file). */
async function writeFully(handle: FileHandle, parts: Uint8Array | Uint8Array[], position: number): Promise<void> {
  // One buffer: a single pwrite cannot be cut in two by a killed process, which the crash-safety
  // argument relies on (writev may be split by the kernel into several writes at page boundaries).
  const buffer = Array.isArray(parts) ? Buffer.concat(parts) : parts;
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
