import { ComputeError } from '../errors';
import type { ByteSource } from '../source';

export type SlideFormat = 'tiff' | 'dicom';

/** DICOM Part 10: a 128-byte preamble, then `DICM`. */
const DICOM_MAGIC_OFFSET = 128;

/**
 * Which reader a file needs, from its first bytes alone. Anything else is refused here with a
 * message a person can act on, before any parser sees it.
 */
export async function detectSlideFormat(source: ByteSource, signal?: AbortSignal): Promise<SlideFormat> {
  if (source.size === 0) throw new ComputeError('NotTiff', 'the file is empty (0 bytes)');
  const head = await source.read(0, Math.min(source.size, DICOM_MAGIC_OFFSET + 4), signal);
  if (isTiffHeader(head)) return 'tiff';
  if (ascii(head.subarray(DICOM_MAGIC_OFFSET, DICOM_MAGIC_OFFSET + 4)) === 'DICM') return 'dicom';
  throw new ComputeError(
    'NotTiff',
    'the file is not a whole-slide image this service reads (expected a TIFF-family slide such as SVS, NDPI, ' +
      'OME-TIFF or pyramidal TIFF, or a DICOM WSI instance)',
  );
}

function isTiffHeader(head: Uint8Array): boolean {
  const order = ascii(head.subarray(0, 2));
  if (head.length < 4 || (order !== 'II' && order !== 'MM')) return false;
  const version =
    order === 'II' ? (head[2] ?? 0) | ((head[3] ?? 0) << 8) : ((head[2] ?? 0) << 8) | (head[3] ?? 0);
  // 42: classic TIFF; 43: BigTIFF.
  return version === 42 || version === 43;
}

function ascii(bytes: Uint8Array): string {
  return String.fromCharCode(...bytes);
}
