import type { RgbImage } from '../image';

/**
 * Decoded tiles, least recently used first out, bounded by bytes rather than by count because
 * tile sizes differ between slides by 64x. A `Map` keeps insertion order, which is the LRU order
 * once a hit re-inserts its entry.
 */
export class TileCache {
  private readonly entries = new Map<string, RgbImage>();
  private bytes = 0;

  constructor(readonly maxBytes: number) {}

  get(key: string): RgbImage | undefined {
    const image = this.entries.get(key);
    if (image !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, image);
    }
    return image;
  }

  set(key: string, image: RgbImage): void {
    const size = image.data.byteLength;
    if (size > this.maxBytes) return;
    this.delete(key);
    this.entries.set(key, image);
    this.bytes += size;
    for (const [oldest, old] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= old.data.byteLength;
    }
  }

  private delete(key: string): void {
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.bytes -= old.data.byteLength;
  }
}

/** At most `max` tasks at once; the rest wait in order. A freed slot passes straight to the next. */
export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly max: number) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active < this.max) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next === undefined) this.active--;
      else next();
    }
  }
}
