/**
 * Marker-controlled watershed by flooding: a hierarchical queue (one FIFO bucket per quantised
 * elevation) in place of a heap. Each pixel enters the queue once, labelled as it enters, as in
 * scikit-image's `watershed`; pixels of one bucket leave in the order they came, so the result
 * is deterministic and ties split by arrival. 4-connected.
 */

export interface WatershedInput {
  /** Lower floods first; e.g. the negated distance to background. */
  elevation: Float32Array;
  /** Seed labels (0 = unlabelled); flooded in place and returned. */
  labels: Uint32Array;
  /** Only pixels with `mask[i] !== 0` are flooded; seeds outside it stay as they are. */
  mask: Uint8Array;
  width: number;
  height: number;
  /** Elevation buckets; finer costs memory per bucket, not time per pixel. Default 4096. */
  levels?: number;
}

export function seededWatershed(input: WatershedInput): Uint32Array {
  const { elevation, labels, mask, width, height } = input;
  const n = width * height;
  if (elevation.length !== n || labels.length !== n || mask.length !== n) {
    throw new RangeError('watershed inputs do not match the image size');
  }
  const queue = new BucketQueue(n, input.levels ?? 4096, elevationRange(elevation, mask, labels));
  for (let i = 0; i < n; i++) if (labels[i] !== 0) queue.push(i, queue.bucketOf(elevation[i]!));
  const last = width - 1;
  for (let p = queue.pop(); p >= 0; p = queue.pop()) {
    const label = labels[p]!;
    const floor = queue.current;
    const x = p % width;
    if (x > 0) floodInto(p - 1, label, floor, input, queue);
    if (x < last) floodInto(p + 1, label, floor, input, queue);
    if (p >= width) floodInto(p - width, label, floor, input, queue);
    if (p + width < n) floodInto(p + width, label, floor, input, queue);
  }
  return labels;
}

function floodInto(q: number, label: number, floor: number, input: WatershedInput, queue: BucketQueue): void {
  if (input.labels[q] !== 0 || input.mask[q] === 0) return;
  input.labels[q] = label;
  let bucket = queue.bucketOf(input.elevation[q]!);
  // A pixel below the water already reached floods at the current level, never back in time.
  if (bucket < floor) bucket = floor;
  queue.push(q, bucket);
}

function elevationRange(elevation: Float32Array, mask: Uint8Array, labels: Uint32Array): [number, number] {
  let low = Number.POSITIVE_INFINITY;
  let high = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < elevation.length; i++) {
    if (mask[i] === 0 && labels[i] === 0) continue;
    const e = elevation[i]!;
    if (e < low) low = e;
    if (e > high) high = e;
  }
  return low <= high ? [low, high] : [0, 0];
}

/** FIFO buckets as linked lists through one `next` array: no allocation per push. */
class BucketQueue {
  readonly head: Int32Array;
  readonly tail: Int32Array;
  readonly next: Int32Array;
  current = 0;
  private readonly low: number;
  private readonly scale: number;

  constructor(pixels: number, levels: number, [low, high]: [number, number]) {
    this.head = new Int32Array(levels).fill(-1);
    this.tail = new Int32Array(levels).fill(-1);
    this.next = new Int32Array(pixels);
    this.low = low;
    this.scale = high > low ? (levels - 1) / (high - low) : 0;
  }

  bucketOf(elevation: number): number {
    const b = Math.floor((elevation - this.low) * this.scale);
    return b < 0 ? 0 : b >= this.head.length ? this.head.length - 1 : b;
  }

  push(pixel: number, bucket: number): void {
    this.next[pixel] = -1;
    if (this.tail[bucket] === -1) this.head[bucket] = pixel;
    else this.next[this.tail[bucket]!] = pixel;
    this.tail[bucket] = pixel;
  }

  /** The first pixel of the lowest non-empty bucket, or -1 when the queue is empty. */
  pop(): number {
    while (this.current < this.head.length && this.head[this.current] === -1) this.current++;
    if (this.current === this.head.length) return -1;
    const pixel = this.head[this.current]!;
    const after = this.next[pixel]!;
    this.head[this.current] = after;
    if (after === -1) this.tail[this.current] = -1;
    return pixel;
  }
}
