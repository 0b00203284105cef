import type { PyramidLevel } from './plan';

/** The `attributes` of an H&E image group, OME-NGFF 0.5 (`ome` key, multiscales and omero). */
export function heImageAttributes(
  name: string,
  levels: readonly PyramidLevel[],
  mpp: number | null,
): Record<string, unknown> {
  // Without a calibration the axes carry no unit and one unit is one level-0 pixel, so the
  // pyramid is still self-consistent and a later mpp only changes the scale.
  const unit = mpp === null ? {} : { unit: 'micrometer' };
  const pixel = mpp ?? 1;
  return {
    ome: {
      version: '0.5',
      multiscales: [
        {
          name,
          axes: [
            { name: 'c', type: 'channel' },
            { name: 'y', type: 'space', ...unit },
            { name: 'x', type: 'space', ...unit },
          ],
          datasets: levels.map((level) => ({
            path: level.path,
            coordinateTransformations: [
              { type: 'scale', scale: [1, pixel * level.downsample, pixel * level.downsample] },
            ],
          })),
          type: 'mean',
          metadata: {
            description: '2x2 box average of the level below, rounded half up; sizes rounded down',
            method: 'compute/pyramid buildHePyramid',
            version: '1',
          },
        },
      ],
      omero: {
        channels: [channel('R', 'FF0000'), channel('G', '00FF00'), channel('B', '0000FF')],
        rdefs: { model: 'color' },
      },
    },
  };
}

function channel(label: string, color: string) {
  return { label, color, active: true, window: { min: 0, max: 255, start: 0, end: 255 } };
}
