import {
  type OmeZarrStore,
  openPublicSample,
  openResults,
  openSampleHe,
  openSegmentationMask,
  type SpsClient,
  type StoreArray,
} from '../../../sdk';

/** One level of a multiscale image: its array, size, inner chunk side and pixel size in world units. */
export interface Level {
  array: StoreArray;
  width: number;
  height: number;
  chunkWidth: number;
  chunkHeight: number;
  /** World units (µm, or H&E pixels when the slide has no calibration) per pixel of this level. */
  pixelSize: number;
}

export type LayerKind = 'rgb' | 'channel' | 'labels';

/** A multiscale image the viewer draws: the H&E, one predicted marker, or the label mask. */
export interface Layer {
  id: string;
  kind: LayerKind;
  label: string;
  levels: Level[];
}

export interface ChannelLayer extends Layer {
  kind: 'channel';
  /** Display colour, 0..1 per component. */
  color: [number, number, number];
  /** Contrast limits in stored units (uint16). */
  window: { start: number; end: number; min: number; max: number };
}

interface Multiscale {
  name?: string;
  axes?: { name: string; unit?: string }[];
  datasets: { path: string; coordinateTransformations?: { type: string; scale?: number[] }[] }[];
}

function multiscalesOf(attributes: Record<string, unknown>): Multiscale[] {
  const ome = attributes.ome as { multiscales?: Multiscale[] } | undefined;
  return ome?.multiscales ?? [];
}

function multiscaleNamed(store: OmeZarrStore, name: string): Multiscale {
  const all = multiscalesOf(store.attributes);
  const found = all.find((m, i) => (m.name ?? String(i)) === name);
  if (!found) throw new Error(`the store has no multiscale image ${name}`);
  return found;
}

/** Opens every level of a multiscale image, with the x scale its dataset states. */
async function levelsOf(store: OmeZarrStore, name: string): Promise<Level[]> {
  const multiscale = multiscaleNamed(store, name);
  return Promise.all(
    multiscale.datasets.map(async (dataset, level) => {
      const array = await store.open(name, level);
      const scale = dataset.coordinateTransformations?.find((t) => t.type === 'scale')?.scale;
      const [, height, width] = array.shape as [number, number, number];
      const [, chunkHeight, chunkWidth] = array.chunks as [number, number, number];
      return { array, width, height, chunkWidth, chunkHeight, pixelSize: scale?.at(-1) ?? 2 ** level };
    }),
  );
}

/** `"FF8000"` as 0..1 components. */
function rgbOf(hex: string | undefined): [number, number, number] {
  const value = Number.parseInt(hex ?? 'FFFFFF', 16);
  return [((value >> 16) & 255) / 255, ((value >> 8) & 255) / 255, (value & 255) / 255];
}

/**
 * The sample's H&E pyramid in micrometres at the sample's own scale (its store may still hold
 * the scale it had before one was set or corrected), or in its pixels when it has none.
 */
export async function heLayer(
  sps: SpsClient,
  sample: { id: string; mpp: number | null },
): Promise<{ layer: Layer; unit: string }> {
  const he = await heLayerOf(await openSampleHe(sps, sample.id));
  if (sample.mpp === null) return he;
  return { layer: scaled(he.layer, sample.mpp / he.layer.levels[0]!.pixelSize), unit: 'µm' };
}

/**
 * A marker or label layer laid on the H&E's pixels: the service makes each one's level 0 from
 * a power-of-two block of H&E pixels, whatever scale its store states (a store keeps the scale
 * the slide had when it was made).
 */
export function onHePixels<T extends Layer>(he: Layer, layer: T): T {
  const [heBase, base] = [he.levels[0]!, layer.levels[0]!];
  const block = 2 ** Math.round(Math.log2(heBase.width / base.width));
  return scaled(layer, (heBase.pixelSize * block) / base.pixelSize);
}

function scaled<T extends Layer>(layer: T, factor: number): T {
  return {
    ...layer,
    levels: layer.levels.map((level) => ({ ...level, pixelSize: level.pixelSize * factor })),
  };
}

async function heLayerOf(store: OmeZarrStore): Promise<{ layer: Layer; unit: string }> {
  const name = [...store.multiscales.keys()][0];
  if (name === undefined) throw new Error('the H&E store has no multiscale image');
  const unit = multiscaleNamed(store, name).axes?.at(-1)?.unit === 'micrometer' ? 'µm' : 'px';
  return { layer: { id: 'he', kind: 'rgb', label: 'H&E', levels: await levelsOf(store, name) }, unit };
}

interface Omero {
  channels?: { label?: string; color?: string; window?: Partial<ChannelLayer['window']> }[];
}

/**
 * The markers of completed prediction jobs, newest job first, each marker once (a later
 * prediction of a marker replaces an earlier one): colour and window from the marker's
 * `omero` metadata.
 */
export async function channelLayers(
  sps: SpsClient,
  jobs: readonly { id: string; status: string; markers: string[] }[],
): Promise<ChannelLayer[]> {
  const seen = new Set<string>();
  const layers: ChannelLayer[] = [];
  for (const job of jobs) {
    if (job.status !== 'completed' || job.markers.every((m) => seen.has(m))) continue;
    const store = await openResults(sps, job.id);
    const fresh = [...store.multiscales.keys()].filter((marker) => !seen.has(marker));
    for (const marker of fresh) seen.add(marker);
    layers.push(...(await markerLayers(store, fresh, job.id)));
  }
  return layers;
}

/** `markers` of a store laid out as a prediction store (`markers/{name}` image groups). */
function markerLayers(store: OmeZarrStore, markers: string[], idPrefix: string): Promise<ChannelLayer[]> {
  return Promise.all(
    markers.map(async (marker): Promise<ChannelLayer> => {
      const attributes = await store.groupAttributes(`markers/${marker}`);
      const omero = (attributes.ome as { omero?: Omero } | undefined)?.omero?.channels?.[0];
      return {
        id: `${idPrefix}/${marker}`,
        kind: 'channel',
        label: marker,
        levels: await levelsOf(store, marker),
        color: rgbOf(omero?.color),
        window: { start: 0, end: 65535, min: 0, max: 65535, ...omero?.window },
      };
    }),
  );
}

/** A public sample's H&E and pinned markers, through the public byte proxy. */
export async function publicLayers(
  sps: SpsClient,
  publicId: string,
): Promise<{ he: { layer: Layer; unit: string }; channels: ChannelLayer[] }> {
  const stores = await openPublicSample(sps, publicId);
  const [he, channels] = await Promise.all([
    heLayerOf(stores.he),
    markerLayers(stores.markers, [...stores.markers.multiscales.keys()], publicId),
  ]);
  return { he, channels: channels.map((channel) => onHePixels(he.layer, channel)) };
}

/** The label mask of a completed segmentation layer. */
export async function labelLayer(sps: SpsClient, sampleId: string, layerId: string): Promise<Layer> {
  const store = await openSegmentationMask(sps, sampleId, layerId);
  const name = [...store.multiscales.keys()][0]!;
  return { id: 'cells', kind: 'labels', label: 'Cell outlines', levels: await levelsOf(store, name) };
}
