import * as path from 'node:path';
import { Writable } from 'node:stream';
import { type FileSource, fileSource } from '../../../compute/source';

export const wsiDir = path.join(__dirname, '../../../../shared/data/wsi');
export const fixtureDir = path.join(__dirname, '../../fixtures/tiff');

/** Opens a shared test slide; the caller closes it (see `withSlide`). */
export function openSlide(name: string): Promise<FileSource> {
  return fileSource(path.join(wsiDir, name));
}

export async function withSource<T>(file: string, use: (source: FileSource) => Promise<T>): Promise<T> {
  const source = await fileSource(file);
  try {
    return await use(source);
  } finally {
    await source.close();
  }
}

/** A sink that keeps what it is given, for checking a written copy byte for byte. */
export class MemorySink extends Writable {
  private readonly chunks: Buffer[] = [];

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.chunks.push(chunk);
    done();
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

export interface TinyEntry {
  tag: number;
  type: number;
  values: number[];
}

/**
 * A minimal little-endian classic TIFF with one IFD at offset 8: single SHORT/LONG values sit
 * inline, arrays (LONG only) follow the IFD. For malformed inputs that no real tool would write.
 */
export function tinyTiff(
  entries: TinyEntry[],
  options: { next?: number; trailing?: number } = {},
): Uint8Array {
  const ifdSize = 2 + entries.length * 12 + 4;
  const extra = entries.filter((e) => e.values.length > 1).reduce((n, e) => n + e.values.length * 4, 0);
  const bytes = new Uint8Array(8 + ifdSize + extra + (options.trailing ?? 0));
  const view = new DataView(bytes.buffer);
  bytes.set([0x49, 0x49], 0);
  view.setUint16(2, 42, true);
  view.setUint32(4, 8, true);
  view.setUint16(8, entries.length, true);
  let out = 8 + ifdSize;
  entries.forEach((entry, i) => {
    const at = 10 + i * 12;
    view.setUint16(at, entry.tag, true);
    view.setUint16(at + 2, entry.type, true);
    view.setUint32(at + 4, entry.values.length, true);
    const write = (pos: number, value: number) =>
      entry.type === 3 ? view.setUint16(pos, value, true) : view.setUint32(pos, value, true);
    if (entry.values.length === 1) write(at + 8, entry.values[0] ?? 0);
    else {
      view.setUint32(at + 8, out, true);
      for (const value of entry.values) {
        view.setUint32(out, value, true);
        out += 4;
      }
    }
  });
  view.setUint32(10 + entries.length * 12, options.next ?? 0, true);
  return bytes;
}
