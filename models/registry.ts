/**
 * The model registry: each prediction model version, whether it can still be dispatched,
 * and for dispatchable ones the channels it predicts. The marker catalog is built from it.
 * The ONNX file of v0.7 and its input scale, tile size and halo arrive with the prediction
 * issue; today the registry is the catalog's source of truth.
 */
export interface MarkerChannel {
  name: string;
  /** Pinned and readable on public samples. */
  publicPanel: boolean;
}

export type ModelEntry =
  | { version: string; state: 'sunset' }
  | { version: string; state: 'dispatchable'; channels: readonly MarkerChannel[] };

const v07Channels: readonly MarkerChannel[] = [
  { name: 'DAPI', publicPanel: true },
  { name: 'PanCK', publicPanel: true },
  { name: 'CD3', publicPanel: true },
  { name: 'CD4', publicPanel: false },
  { name: 'CD8', publicPanel: true },
  { name: 'CD20', publicPanel: true },
  { name: 'CD45', publicPanel: false },
  { name: 'CD68', publicPanel: true },
  { name: 'Ki67', publicPanel: false },
  { name: 'aSMA', publicPanel: false },
  { name: 'FOXP3', publicPanel: false },
  { name: 'PD-L1', publicPanel: false },
  { name: 'CD31', publicPanel: false },
  { name: 'Vimentin', publicPanel: false },
];

export const modelRegistry: readonly ModelEntry[] = [
  { version: 'v0.4', state: 'sunset' },
  { version: 'v0.5', state: 'sunset' },
  { version: 'v0.7', state: 'dispatchable', channels: v07Channels },
];

export const CURRENT_MODEL = 'v0.7';

/** The marker catalog: the channels of the current default model. */
export function markerCatalog(): readonly MarkerChannel[] {
  const current = modelRegistry.find((entry) => entry.version === CURRENT_MODEL);
  if (current?.state !== 'dispatchable') throw new Error(`model ${CURRENT_MODEL} is not dispatchable`);
  return current.channels;
}
