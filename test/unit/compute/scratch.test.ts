import * as path from 'node:path';
import { probeSlide } from '../../../compute/slide';
import { fileSource } from '../../../compute/source';

const wsi = path.join(__dirname, '../../../../shared/data/wsi');
test('dump', async () => {
  for (const f of [
    'CMU-1-Small-Region.svs',
    'tcga-cr-7395-01a-01-ts1.svs',
    'BRACS_1640_N_3_cropped.tiff',
    'OS-1-detail.ome.tif',
    'CMU-1-Small-Region.derived-pyramid.ome.tif',
    'test3-TRITC-2-560.ndpi',
  ]) {
    const src = await fileSource(path.join(wsi, f));
    const p = await probeSlide(src);
    process.stdout.write(
      f + ' ' + JSON.stringify({ ...p, levels: p.levels.map((l) => Object.values(l).join(',')) }) + '\n',
    );
    await src.close();
  }
});
