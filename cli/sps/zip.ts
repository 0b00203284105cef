import { SpsError } from '../../sdk';

/** One stored (uncompressed) entry of a zip: its name, its local header's offset, its size. */
export interface ZipEntry {
  name: string;
  localHeader: number;
  size: number;
}

const EOCD = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_EOCD = 0x06064b50;
const CENTRAL_HEADER = 0x02014b50;
const LOCAL_HEADER = 0x04034b50;
const LOCAL_HEADER_SIZE = 30;
/** The end record (22 bytes) after a comment of at most 65535, and ZIP64's locator before it. */
const TAIL = 22 + 0xffff + 20;

const broken = (what: string) => new SpsError('invalid_response', `the zip is not readable: ${what}`);

/**
 * The entries of a zip read through `read(range)` (an HTTP `Range` value, answering the bytes
 * it selects): its tail, then its central directory, ZIP64 records included. Only STORE
 * entries are accepted, as every zipped OME-Zarr of the service holds them.
 */
export async function readZipDirectory(read: (range: string) => Promise<Uint8Array>): Promise<ZipEntry[]> {
  const tail = Buffer.from(await read(`bytes=-${TAIL}`));
  let end = -1;
  for (let at = tail.length - 22; at >= 0; at--) {
    if (tail.readUInt32LE(at) === EOCD) {
      end = at;
      break;
    }
  }
  if (end < 0) throw broken('no end of central directory');
  let count = tail.readUInt16LE(end + 10);
  let directorySize = tail.readUInt32LE(end + 12);
  let directoryOffset = tail.readUInt32LE(end + 16);
  if (count === 0xffff || directorySize === 0xffffffff || directoryOffset === 0xffffffff) {
    const locator = end - 20;
    if (locator < 0 || tail.readUInt32LE(locator) !== ZIP64_LOCATOR) throw broken('no ZIP64 locator');
    const at = Number(tail.readBigUInt64LE(locator + 8));
    const record = Buffer.from(await read(`bytes=${at}-${at + 55}`));
    if (record.readUInt32LE(0) !== ZIP64_EOCD) throw broken('no ZIP64 end record');
    count = Number(record.readBigUInt64LE(32));
    directorySize = Number(record.readBigUInt64LE(40));
    directoryOffset = Number(record.readBigUInt64LE(48));
  }
  const directory =
    directorySize === 0
      ? Buffer.alloc(0)
      : Buffer.from(await read(`bytes=${directoryOffset}-${directoryOffset + directorySize - 1}`));
  const entries: ZipEntry[] = [];
  for (let at = 0; entries.length < count; ) {
    if (at + 46 > directory.length || directory.readUInt32LE(at) !== CENTRAL_HEADER) {
      throw broken('a central directory record is missing');
    }
    const method = directory.readUInt16LE(at + 10);
    const nameLength = directory.readUInt16LE(at + 28);
    const extraLength = directory.readUInt16LE(at + 30);
    const commentLength = directory.readUInt16LE(at + 32);
    const name = directory.toString('utf8', at + 46, at + 46 + nameLength);
    const sizes = zip64Sizes(directory.subarray(at + 46 + nameLength, at + 46 + nameLength + extraLength), {
      compressed: directory.readUInt32LE(at + 20),
      size: directory.readUInt32LE(at + 24),
      localHeader: directory.readUInt32LE(at + 42),
    });
    if (method !== 0 || sizes.compressed !== sizes.size) throw broken(`${name} is compressed`);
    entries.push({ name, localHeader: sizes.localHeader, size: sizes.size });
    at += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** The 32-bit fields set to 0xffffffff, taken from the ZIP64 extra field (0x0001) in its order. */
function zip64Sizes(extra: Buffer, fields: { compressed: number; size: number; localHeader: number }) {
  const out = { ...fields };
  for (let at = 0; at + 4 <= extra.length; ) {
    const id = extra.readUInt16LE(at);
    const length = extra.readUInt16LE(at + 2);
    if (id === 0x0001) {
      let field = at + 4;
      for (const key of ['size', 'compressed', 'localHeader'] as const) {
        if (fields[key] === 0xffffffff) {
          out[key] = Number(extra.readBigUInt64LE(field));
          field += 8;
        }
      }
    }
    at += 4 + length;
  }
  return out;
}

/**
 * Reads a zip's bytes front to back once (one GET, whatever its size) and hands each wanted
 * entry's data to `write` as a stream of pieces, in file order; what lies between is skipped.
 * `body` starts at the zip's byte `start` (a ranged GET resuming at an entry's local header).
 */
export async function extractStoredEntries(
  body: AsyncIterable<Uint8Array>,
  entries: readonly ZipEntry[],
  write: (entry: ZipEntry, data: AsyncIterable<Buffer>) => Promise<void>,
  start = 0,
): Promise<void> {
  const reader = new SequentialReader(body[Symbol.asyncIterator](), start);
  for (const entry of [...entries].sort((a, b) => a.localHeader - b.localHeader)) {
    if (entry.localHeader < reader.position) throw broken(`${entry.name} overlaps another entry`);
    await reader.skip(entry.localHeader - reader.position);
    const header = await reader.take(LOCAL_HEADER_SIZE);
    if (header.readUInt32LE(0) !== LOCAL_HEADER) throw broken(`no local header for ${entry.name}`);
    await reader.skip(header.readUInt16LE(26) + header.readUInt16LE(28));
    await write(entry, reader.pieces(entry.size));
    // A writer that stopped early leaves the rest of the entry to be skipped here.
    await reader.skip(
      entry.localHeader +
        LOCAL_HEADER_SIZE +
        header.readUInt16LE(26) +
        header.readUInt16LE(28) +
        entry.size -
        reader.position,
    );
  }
}

/** A byte stream read forward only: take a few bytes, stream a run of them, or skip some. */
class SequentialReader {
  private buffer: Buffer = Buffer.alloc(0);

  constructor(
    private readonly chunks: AsyncIterator<Uint8Array>,
    public position: number,
  ) {}

  private async more(): Promise<void> {
    const next = await this.chunks.next();
    if (next.done) throw broken('it ends early');
    this.buffer =
      this.buffer.length === 0 ? Buffer.from(next.value) : Buffer.concat([this.buffer, next.value]);
  }

  async take(length: number): Promise<Buffer> {
    while (this.buffer.length < length) await this.more();
    const bytes = this.buffer.subarray(0, length);
    this.buffer = this.buffer.subarray(length);
    this.position += length;
    return bytes;
  }

  async *pieces(length: number): AsyncGenerator<Buffer> {
    let left = length;
    while (left > 0) {
      if (this.buffer.length === 0) await this.more();
      const piece = this.buffer.subarray(0, Math.min(left, this.buffer.length));
      this.buffer = this.buffer.subarray(piece.length);
      this.position += piece.length;
      left -= piece.length;
      yield piece;
    }
  }

  async skip(length: number): Promise<void> {
    for await (const _ of this.pieces(length));
  }
}
