import { ComputeError } from '../errors';
import type { KeyValueStore } from '../store';
import { type GroupMetadata, groupMetadata, parseJson } from '../zarr';
import { type ArchiveDocument, type ArchiveSource, planZarrArchive } from './zarr-archive';
import type { ZipEntrySource } from './zarr-zip';

/** The parts of a SpatialData archive: NGFF 0.5 image groups at their sink roots, a table's keys. */
export interface SpatialDataArchiveSources {
  /** The H&E pyramid, as the image element `images/he`. */
  he: KeyValueStore;
  /** The label mask (`c, y, x`, c = 1), as the 2-D label element `labels/cells`. */
  labels: KeyValueStore;
  /**
   * A table written by `writeCellsTableZarr` at the sink root (its `region` `cells`), as
   * `tables/table`: SpatialData's element names are unique across kinds.
   */
  table: { sink: KeyValueStore; keys: readonly string[] };
  signal?: AbortSignal;
}

interface Axis {
  name: string;
  type?: string;
  unit?: string;
}

interface Multiscale {
  axes: Axis[];
  datasets: { path: string; coordinateTransformations: { type: string; scale?: number[] }[] }[];
  [key: string]: unknown;
}

/**
 * The entries of a zipped SpatialData store (spatialdata 0.7.3's format 0.2, Zarr v3) of the
 * H&E, the cell labels and the cell table (`images/he`, `labels/cells`, `tables/table`). SpatialData reads image and label groups only with
 * its own NGFF version string (`0.5-dev-spatialdata`) and a multiscale-level transformation
 * that names its output coordinate system, so those groups get SpatialData's `zarr.json`
 * (ome-zarr-py reads them too); their arrays are the sources' bytes. Labels are 2-D in
 * SpatialData, so the mask's channel axis is dropped from its metadata and chunk keys.
 */
export async function planSpatialDataArchive(sources: SpatialDataArchiveSources): Promise<ZipEntrySource[]> {
  const { signal } = sources;
  const he = await readGroup(sources.he, signal);
  const labels = await readGroup(sources.labels, signal);
  const parts: ArchiveSource[] = [
    { sink: sources.he, from: '', to: 'images/he' },
    { sink: sources.labels, from: '', to: 'labels/cells', dropLeadingAxis: true },
    { sink: sources.table.sink, from: '', to: 'tables/table', keys: sources.table.keys },
  ];
  const documents: ArchiveDocument[] = [
    { path: '', metadata: groupMetadata({ spatialdata_attrs: { version: '0.2' } }) },
    { path: 'images', metadata: groupMetadata({}) },
    { path: 'images/he', metadata: elementGroup(he, 'he', false) },
    { path: 'labels', metadata: groupMetadata({ ome: { labels: ['cells'] } }) },
    { path: 'labels/cells', metadata: elementGroup(labels, 'cells', true) },
    { path: 'tables', metadata: groupMetadata({}) },
  ];
  return planZarrArchive(parts, documents, signal);
}

/**
 * A SpatialData image or label group from an NGFF 0.5 one: dataset scales relative to level 0
 * (as SpatialData writes them), and level 0's pixel size as the transformation from the
 * element's pixels to the `global` coordinate system, in the axes' unit (micrometres).
 */
function elementGroup(source: GroupMetadata, name: string, dropLeadingAxis: boolean): GroupMetadata {
  const ome = source.attributes.ome as { multiscales?: Multiscale[]; omero?: unknown } | undefined;
  const multiscale = ome?.multiscales?.[0];
  const scaleOf = (dataset: Multiscale['datasets'][number]) =>
    dataset.coordinateTransformations.find((t) => t.type === 'scale')?.scale;
  const base = multiscale ? scaleOf(multiscale.datasets[0]!) : undefined;
  if (!multiscale || !base)
    throw new ComputeError('UnsupportedZarr', `${name}: no NGFF multiscale with scales`);
  const keep = <T>(list: readonly T[]) => (dropLeadingAxis ? list.slice(1) : [...list]);
  const axes = keep(multiscale.axes);
  const system = (systemName: string) => ({ name: systemName, axes });
  return groupMetadata({
    ome: {
      version: '0.5-dev-spatialdata',
      multiscales: [
        {
          name,
          axes,
          datasets: multiscale.datasets.map((dataset) => {
            const scale = scaleOf(dataset) ?? base;
            return {
              path: dataset.path,
              coordinateTransformations: [{ type: 'scale', scale: keep(scale.map((s, i) => s / base[i]!)) }],
            };
          }),
          coordinateTransformations: [
            {
              type: 'scale',
              scale: keep(base),
              input: system(axes.map((axis) => axis.name).join('')),
              output: system('global'),
            },
          ],
        },
      ],
      ...(ome?.omero === undefined || dropLeadingAxis ? {} : { omero: ome.omero }),
    },
    spatialdata_attrs: { version: '0.3' },
  });
}

async function readGroup(sink: KeyValueStore, signal?: AbortSignal): Promise<GroupMetadata> {
  const bytes = await sink.get('zarr.json', { signal });
  if (bytes === undefined) throw new ComputeError('UnsupportedZarr', 'no zarr.json: the store is unfinished');
  return parseJson(bytes, 'zarr.json') as unknown as GroupMetadata;
}
