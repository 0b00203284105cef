import { ComputeError } from '../errors';
import { type GroupMetadata, groupMetadata } from '../zarr';

/**
 * SpatialData's on-disk format as spatialdata 0.7.3 reads it (container format 0.2 on Zarr v3):
 * the root's `spatialdata_attrs.version`, and `images/{name}`, `labels/{name}`, `tables/{name}`
 * groups below it. It reads image and label groups only with its own NGFF version string
 * (`0.5-dev-spatialdata`: a plain `0.5` is a KeyError) and a multiscale-level transformation
 * that names its output coordinate system. ome-zarr-py reads such groups as NGFF 0.5.
 */
export const SPATIALDATA_CONTAINER = { version: '0.2' } as const;

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

interface Omero {
  channels: Record<string, unknown>[];
  [key: string]: unknown;
}

/**
 * An image element from an NGFF 0.5 image group: the same levels, SpatialData's metadata.
 * `omero` names the channels (SpatialData's `c` coordinate); default the source's.
 */
export function imageElement(source: GroupMetadata, name: string, omero?: Omero): GroupMetadata {
  const own = (source.attributes.ome as { omero?: Omero } | undefined)?.omero;
  const channels = omero ?? own;
  return elementGroup(source, name, false, channels === undefined ? {} : { omero: channels });
}

/**
 * A 2-D label element (SpatialData's labels are `y, x`) from an NGFF 0.5 label image of axes
 * `c, y, x`: the metadata without the channel axis (the archive drops it from the arrays). Its
 * `image-label` keeps colours and properties but names no source image: ome-zarr-py's reader
 * would load the source as a second image, which SpatialData refuses.
 */
export function labelElement(source: GroupMetadata, name: string): GroupMetadata {
  const label = (source.attributes.ome as { 'image-label'?: Record<string, unknown> } | undefined)?.[
    'image-label'
  ];
  const { source: _source, ...imageLabel } = label ?? {};
  return elementGroup(source, name, true, { 'image-label': imageLabel });
}

/**
 * The channels of a prediction as one `omero`: each marker image's own channel (label, colour,
 * window), in the prediction's marker order.
 */
export function stackedOmero(markers: readonly GroupMetadata[]): Omero {
  const channels = markers.map((marker, i) => {
    const omero = (marker.attributes.ome as { omero?: Omero } | undefined)?.omero;
    const channel = omero?.channels?.[0];
    if (!channel) throw new ComputeError('UnsupportedZarr', `marker ${i} has no omero channel`);
    return channel;
  });
  return { channels, rdefs: { model: 'color' } };
}

/**
 * A SpatialData image or label group from an NGFF 0.5 one: dataset scales relative to level 0
 * (as SpatialData writes them), and level 0's pixel size as the transformation from the
 * element's pixels to the `global` coordinate system, in the axes' unit (micrometres).
 */
function elementGroup(
  source: GroupMetadata,
  name: string,
  dropLeadingAxis: boolean,
  extra: Record<string, unknown>,
): GroupMetadata {
  const ome = source.attributes.ome as { multiscales?: Multiscale[] } | undefined;
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
      ...extra,
    },
    spatialdata_attrs: { version: '0.3' },
  });
}
