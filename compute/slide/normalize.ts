import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ComputeError } from '../errors';

const run = promisify(execFile);

/**
 * Rewrites a slide that no reader of ours decodes (Hamamatsu NDPI, whose levels are single
 * huge JPEGs with restart markers) as a tiled BigTIFF of its level 0, through libvips and
 * OpenSlide (Debian `libvips-tools`). libvips streams, so memory stays flat; the tiles are
 * JPEG at quality 95, one more lossy generation over the NDPI's own JPEG. Our TIFF reader
 * then reads the result like any other slide.
 */
export async function normalizeWithVips(
  inputPath: string,
  outputPath: string,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  const target = `${outputPath}[tile,tile-width=512,tile-height=512,compression=jpeg,Q=95,bigtiff]`;
  try {
    await run('vips', ['flatten', inputPath, target, '--background', '255 255 255'], {
      signal: options.signal,
      maxBuffer: 1 << 20,
      env: systemVipsEnv(),
    });
  } catch (err) {
    const { code, stderr } = err as { code?: string; stderr?: string };
    if (code === 'ENOENT') {
      throw new Error('libvips (the `vips` command) is not installed: apt-get install libvips-tools');
    }
    // libvips prints warnings (unknown vendor tags) before the error that matters.
    const lines = (stderr ?? '')
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.includes('WARNING'));
    const detail = lines.at(-1) ?? (err as Error).message;
    throw new ComputeError('UnsupportedTiff', `OpenSlide could not read the slide: ${detail}`, {
      cause: err,
    });
  }
}

/**
 * sharp's bundled libvips sets VIPSHOME for itself when it loads; inherited, it sends the
 * system `vips` looking for its modules (OpenSlide among them) in sharp's folder, and NDPI
 * then falls through to plain TIFF loading.
 */
export function systemVipsEnv(): NodeJS.ProcessEnv {
  const { VIPSHOME: _sharps, ...env } = process.env;
  return env;
}
