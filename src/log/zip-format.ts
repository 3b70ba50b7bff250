/**
 * The parts of the zip format (PKWARE APPNOTE.TXT) that `.eval` logs use: local file headers,
 * central directory records, the end-of-central-directory record and its ZIP64 forms. Shared by
 * the appender and the reader (which reads through yauzl).
 */
import * as zlib from 'node:zlib';

export const LOCAL_HEADER_SIGNATURE = 0x04034b50;
export const CENTRAL_HEADER_SIGNATURE = 0x02014b50;
export const EOCD_SIGNATURE = 0x06054b50;
export const ZIP64_EOCD_SIGNATURE = 0x06064b50;
export const ZIP64_LOCATOR_SIGNATURE = 0x07064b50;

export const LOCAL_HEADER_SIZE = 30;
export const CENTRAL_HEADER_SIZE = 46;
export const EOCD_SIZE = 22;
export const ZIP64_EOCD_SIZE = 56;
export const ZIP64_LOCATOR_SIZE = 20;

export const METHOD_STORED = 0;
export const METHOD_DEFLATE = 8;
/** Written by default by recent Inspect versions. */
export const METHOD_ZSTD = 93;

export const FLAG_UTF8_NAME = 0x0800;
export const ZIP64_EXTRA_ID = 0x0001;

/** 32-bit fields hold this when the real value is in a ZIP64 record. */
export const U32_SENTINEL = 0xffffffff;
export const U16_SENTINEL = 0xffff;

/** One member as described by the central directory. */
export interface ZipEntry {
  name: string;
  method: number;
  flags: number;
  crc32: number;
  compressedSize: number;
  uncompressedSize: number;
  /** Offset of the member's local header in the file. */
  localHeaderOffset: number;
  dosTime: number;
  dosDate: number;
}

const nodeCrc32 = (zlib as { crc32?: (data: Uint8Array | string, value?: number) => number }).crc32;

/**
 * CRC-32 as zip uses it, from node's zlib (Node >= 20.15). `previous` continues a running CRC
 * over data given in chunks.
 */
export function crc32(data: Uint8Array, previous = 0): number {
  if (!nodeCrc32) {
    throw new Error(`this Node (${process.version}) has no zlib.crc32, which ct needs to write logs; use Node >= 20.15`);
  }
  return nodeCrc32(data, previous) >>> 0;
}

/** MS-DOS time and date fields (local time, 2-second resolution, years 1980-2107). */
export function dosDateTime(date: Date): { dosTime: number; dosDate: number } {
  const year = Math.min(Math.max(date.getFullYear(), 1980), 2107);
  return {
    dosTime: (date.getHours() << 11) | (date.getMinutes() << 5) | Math.floor(date.getSeconds() / 2),
    dosDate: ((year - 1980) << 9) | ((date.getMonth() + 1) << 5) | date.getDate(),
  };
}
