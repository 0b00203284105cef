import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { ByteSource } from '../source';
import { hasLongLength, Tag, undefinedLength } from './tags';

/** Small writes are gathered to this size before they reach the sink. */
const flushBytes = 64 << 10;
/** Large values (pixel data) are copied from the source in pieces of this size: flat memory. */
const copyBytes = 8 << 20;

/** An element header in the dataset's encoding; items and delimiters never carry a VR. */
export function encodeHeader(tag: number, vr: string, length: number, explicit: boolean): Uint8Array {
  const bare = !explicit || tag >>> 16 === 0xfffe;
  // A value too long for its VR's 16-bit length (a UN the parser gave a VR back) stays UN.
  const written = !hasLongLength(vr) && length > 0xffff ? 'UN' : vr;
  const long = !bare && hasLongLength(written);
  const bytes = new Uint8Array(long ? 12 : 8);
  const data = new DataView(bytes.buffer);
  data.setUint16(0, tag >>> 16, true);
  data.setUint16(2, tag & 0xffff, true);
  if (bare) {
    data.setUint32(4, length, true);
    return bytes;
  }
  bytes[4] = written.charCodeAt(0);
  bytes[5] = written.charCodeAt(1);
  if (long) data.setUint32(8, length, true);
  else data.setUint16(6, length, true);
  return bytes;
}

/** A text value padded to an even length, as every VR requires: UI with NUL, the rest with a space. */
export function textValue(vr: string, text: string): Uint8Array {
  const padded = text.length % 2 === 0 ? text : `${text}${vr === 'UI' ? '\0' : ' '}`;
  return Uint8Array.from(padded, (c) => c.charCodeAt(0) & 0xff);
}

/**
 * Writes a dataset forward into a sink. Sequences and items are always written with undefined
 * lengths, so a rewritten item never needs its length known before it is written.
 */
export class DicomWriter {
  private chunks: Uint8Array[] = [];
  private pending = 0;
  bytesWritten = 0;

  constructor(
    private readonly sink: Writable,
    readonly explicit: boolean,
    private readonly signal: AbortSignal | undefined,
  ) {}

  async raw(bytes: Uint8Array): Promise<void> {
    this.chunks.push(bytes);
    this.pending += bytes.byteLength;
    this.bytesWritten += bytes.byteLength;
    if (this.pending >= flushBytes) await this.flush();
  }

  async element(tag: number, vr: string, value: Uint8Array): Promise<void> {
    await this.raw(encodeHeader(tag, vr, value.byteLength, this.explicit));
    await this.raw(value);
  }

  /** An element whose value stays in the source: copied in pieces, never held whole. */
  async copied(
    header: { tag: number; vr: string; length: number },
    { source, offset, length }: { source: ByteSource; offset: number; length: number },
  ): Promise<void> {
    await this.raw(encodeHeader(header.tag, header.vr, header.length, this.explicit));
    await this.flush();
    for (let done = 0; done < length; done += copyBytes) {
      const piece = await source.read(offset + done, Math.min(copyBytes, length - done), this.signal);
      this.bytesWritten += piece.byteLength;
      await this.send(piece);
    }
  }

  sequenceStart(tag: number): Promise<void> {
    return this.raw(encodeHeader(tag, 'SQ', undefinedLength, this.explicit));
  }

  itemStart(): Promise<void> {
    return this.raw(encodeHeader(Tag.Item, '', undefinedLength, this.explicit));
  }

  itemEnd(): Promise<void> {
    return this.raw(encodeHeader(Tag.ItemDelimitation, '', 0, this.explicit));
  }

  sequenceEnd(): Promise<void> {
    return this.raw(encodeHeader(Tag.SequenceDelimitation, '', 0, this.explicit));
  }

  async flush(): Promise<void> {
    if (this.pending === 0) return;
    const chunk = Buffer.concat(this.chunks);
    this.chunks = [];
    this.pending = 0;
    await this.send(chunk);
  }

  /** Waits while the sink is full, so memory stays flat whatever the sink's speed. */
  private async send(chunk: Uint8Array): Promise<void> {
    this.signal?.throwIfAborted();
    if (!this.sink.write(chunk)) await once(this.sink, 'drain', { signal: this.signal });
  }
}
