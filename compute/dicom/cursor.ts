import { ComputeError } from '../errors';
import type { ByteSource } from '../source';

/** Element headers are read through a window this size: one source read per many small elements. */
const windowBytes = 64 << 10;

/**
 * A forward reader over a byte source. Every read is checked against the source size first, so
 * a length that runs past the end is `MalformedDicom` (a truncated or lying file), never a
 * short read or a huge allocation.
 */
export class Cursor {
  private window: Uint8Array = new Uint8Array(0);
  private windowStart = 0;

  constructor(
    readonly source: ByteSource,
    public position: number,
    private readonly signal: AbortSignal | undefined,
  ) {}

  get remaining(): number {
    return this.source.size - this.position;
  }

  /** Throws unless `length` more bytes exist; `what` names them in the message. */
  require(length: number, what: string): void {
    if (!Number.isSafeInteger(length) || length < 0 || length > this.remaining) {
      throw new ComputeError(
        'MalformedDicom',
        `${what} at ${this.position} claims ${length} bytes, past the end of the file (${this.source.size} bytes): truncated or corrupt`,
      );
    }
  }

  /** The next `length` bytes; a view into the window, valid until the next read. */
  async bytes(length: number, what: string): Promise<Uint8Array> {
    this.require(length, what);
    if (length > windowBytes) {
      const bytes = await this.source.read(this.position, length, this.signal);
      this.position += length;
      return bytes;
    }
    const start = this.position - this.windowStart;
    if (start < 0 || start + length > this.window.byteLength) {
      const size = Math.min(windowBytes, this.remaining);
      this.window = await this.source.read(this.position, size, this.signal);
      this.windowStart = this.position;
    }
    const at = this.position - this.windowStart;
    this.position += length;
    return this.window.subarray(at, at + length);
  }

  /** Like `bytes`, but a copy that outlives the window (values kept in the dataset). */
  async copy(length: number, what: string): Promise<Uint8Array> {
    return Uint8Array.from(await this.bytes(length, what));
  }

  skip(length: number, what: string): void {
    this.require(length, what);
    this.position += length;
  }
}

export function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
