import type { KeyValueStore, ShardEncoder, ShardedArray, ShardGeometry } from '../zarr';
import type { ShardAddress } from './plan';
import { markerArray, type PredictionStoreLayout } from './store';

/**
 * Level 0 of each marker's array in the prediction store: the only part of the prediction that
 * speaks to the store's bytes.
 */
export class PredictionSink {
  private readonly arrays: ShardedArray<'uint16'>[];

  constructor(
    layout: PredictionStoreLayout,
    private readonly sink: KeyValueStore,
    private readonly signal?: AbortSignal,
  ) {
    this.arrays = layout.markers.map((marker) => markerArray(layout, marker, 0));
  }

  /** The shards' layout, the same for every marker. */
  get geometry(): ShardGeometry {
    return this.arrays[0]!.geometry;
  }

  async writeMetadata(): Promise<void> {
    for (const array of this.arrays) await array.writeMetadata(this.sink, this.signal);
  }

  /** Stores one shard of every marker (`buffers`, one per marker), each encoded by `encode(m)`. */
  async storeShard(
    shard: ShardAddress,
    buffers: readonly Uint16Array[],
    encode: (marker: number) => ShardEncoder,
  ): Promise<void> {
    await Promise.all(
      this.arrays.map((array, m) =>
        array.writeShard(this.sink, shard.y, shard.x, buffers[m]!, this.signal, encode(m)),
      ),
    );
  }
}
