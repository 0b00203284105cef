import type { Layer, LayerKind } from './sources';

/** One decoded chunk of one level of a layer, uploaded as a texture. */
export interface Tile {
  key: string;
  texture: WebGLTexture;
  /** The chunk's full size in texels (edge chunks are padded to it). */
  width: number;
  height: number;
  /** Label values, kept for the cell under the cursor (label layers only). */
  labels?: Uint32Array;
}

export interface TileAddress {
  layer: Layer;
  level: number;
  x: number;
  y: number;
}

const isAbort = (err: unknown) => err instanceof DOMException && err.name === 'AbortError';

export const tileKey = (a: TileAddress) => `${a.layer.id}/${a.level}/${a.y}/${a.x}`;

/**
 * Loads at once. A load holds its place while its chunk waits for a decoder: ten left the
 * connections idle behind the decoding of the first layers' chunks. More than a viewport's
 * worth started the fetch-ahead's every request at once, and the next view aborted many of
 * them (shard indexes included, asked again). The browser queues requests beyond its six
 * connections per origin itself, in the order they were made.
 */
const CONCURRENCY = 32;
/** Textures kept: a few viewports of five layers with the chunks fetched ahead of them. */
const CAPACITY = 600;

const formats: Record<LayerKind, { internal: number; format: number; type: number }> = {
  rgb: {
    internal: WebGL2RenderingContext.R8,
    format: WebGL2RenderingContext.RED,
    type: WebGL2RenderingContext.UNSIGNED_BYTE,
  },
  channel: {
    internal: WebGL2RenderingContext.R16UI,
    format: WebGL2RenderingContext.RED_INTEGER,
    type: WebGL2RenderingContext.UNSIGNED_SHORT,
  },
  labels: {
    internal: WebGL2RenderingContext.R32UI,
    format: WebGL2RenderingContext.RED_INTEGER,
    type: WebGL2RenderingContext.UNSIGNED_INT,
  },
};

/**
 * Chunks fetched through zarrita (Range reads of the shards) in the order the frame asks for
 * them, at most `CONCURRENCY` at once. The frame's own chunks come first; chunks it expects
 * next (`ahead`: around the view, the next finer and coarser levels) load only while none of
 * its own is waiting or loading. A request no longer wanted is dropped, and aborted if it is on
 * its way. Textures beyond `CAPACITY` are freed least recently used first.
 */
export class TileCache {
  private readonly tiles = new Map<string, Tile>();
  private readonly pending = new Map<string, TileAddress>();
  private readonly loading = new Map<string, AbortController>();
  private wanted = new Set<string>();
  private ahead = new Set<string>();

  /** Whether the last chunk that settled failed: the next to arrive says the reads work again. */
  private failing = false;

  constructor(
    private readonly gl: WebGL2RenderingContext,
    private readonly onLoad: () => void,
    private readonly onError: (err: unknown) => void,
    private readonly onRecover: () => void,
  ) {}

  get(address: TileAddress): Tile | undefined {
    const key = tileKey(address);
    const tile = this.tiles.get(key);
    if (tile) {
      // Re-inserted: the Map's order is the recency order.
      this.tiles.delete(key);
      this.tiles.set(key, tile);
    }
    return tile;
  }

  /** The chunks the current frame draws, then those it expects next: anything else is dropped. */
  want(visible: TileAddress[], ahead: TileAddress[] = []): void {
    this.wanted = new Set(visible.map(tileKey));
    this.ahead = new Set(ahead.map(tileKey));
    this.pending.clear();
    for (const [key, controller] of this.loading)
      if (!this.wanted.has(key) && !this.ahead.has(key)) controller.abort();
    for (const address of [...visible, ...ahead]) {
      const key = tileKey(address);
      if (!this.tiles.has(key) && !this.loading.has(key)) this.pending.set(key, address);
    }
    this.pump();
  }

  /** Whether a chunk the current frame draws is still on its way. */
  waiting(): boolean {
    for (const key of this.wanted) if (!this.tiles.has(key)) return true;
    return false;
  }

  dispose(): void {
    for (const controller of this.loading.values()) controller.abort();
    for (const tile of this.tiles.values()) this.gl.deleteTexture(tile.texture);
    this.tiles.clear();
    this.pending.clear();
  }

  /** The frame's first waiting chunk; else, while none of its own is on its way, one fetched ahead. */
  private next(): [string, TileAddress] | undefined {
    let first: [string, TileAddress] | undefined;
    for (const entry of this.pending) {
      if (this.wanted.has(entry[0])) return entry;
      first ??= entry;
    }
    for (const key of this.loading.keys()) if (this.wanted.has(key)) return undefined;
    return first;
  }

  private pump(): void {
    for (let entry = this.next(); entry && this.loading.size < CONCURRENCY; entry = this.next()) {
      const [key, address] = entry;
      this.pending.delete(key);
      const controller = new AbortController();
      let retry = false;
      this.loading.set(key, controller);
      this.load(key, address, controller.signal)
        .catch((err) => {
          // An abort that is not this load's own: the shard index it shared with a load that
          // was aborted (zarrita fetches an index once, with the signal of the first to ask).
          const shared = isAbort(err) && !controller.signal.aborted;
          if (!controller.signal.aborted && !shared) {
            this.failing = true;
            this.onError(err);
          }
          if (shared) retry = true;
        })
        .finally(() => {
          this.loading.delete(key);
          // Aborted, then wanted again before the abort landed: it waits for its turn anew.
          const again = this.wanted.has(key) || this.ahead.has(key);
          if ((controller.signal.aborted || retry) && again && !this.tiles.has(key))
            this.pending.set(key, address);
          this.pump();
        });
    }
  }

  private async load(key: string, address: TileAddress, signal: AbortSignal): Promise<void> {
    const level = address.layer.levels[address.level]!;
    const chunk = await level.array.getChunk([0, address.y, address.x], { signal });
    if (signal.aborted) return;
    const [channels, height, width] = chunk.shape as [number, number, number];
    const gl = this.gl;
    const format = formats[address.layer.kind];
    const texture = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, texture);
    gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
    // Planar channels (the H&E's R, G, B) are stacked vertically in one texture.
    gl.texImage2D(
      gl.TEXTURE_2D,
      0,
      format.internal,
      width,
      height * channels,
      0,
      format.format,
      format.type,
      chunk.data as ArrayBufferView,
    );
    for (const parameter of [gl.TEXTURE_MIN_FILTER, gl.TEXTURE_MAG_FILTER])
      gl.texParameteri(gl.TEXTURE_2D, parameter, gl.NEAREST);
    for (const parameter of [gl.TEXTURE_WRAP_S, gl.TEXTURE_WRAP_T])
      gl.texParameteri(gl.TEXTURE_2D, parameter, gl.CLAMP_TO_EDGE);
    const labels = address.layer.kind === 'labels' ? (chunk.data as Uint32Array) : undefined;
    this.tiles.set(key, { key, texture: texture!, width, height, labels });
    this.evict();
    if (this.failing) {
      this.failing = false;
      this.onRecover();
    }
    // A chunk fetched ahead is drawn when a frame asks for it: no frame now.
    if (this.wanted.has(key)) this.onLoad();
  }

  private evict(): void {
    for (const [key, tile] of this.tiles) {
      if (this.tiles.size <= CAPACITY) return;
      if (this.wanted.has(key) || this.ahead.has(key)) continue;
      this.gl.deleteTexture(tile.texture);
      this.tiles.delete(key);
    }
  }
}
