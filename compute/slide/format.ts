import { ComputeError } from '../errors';
import type { ByteSource } from '../source';

export type SlideFormat = 'tiff' | 'dicom';

/** DICOM Part 10: a 128-byte preamble, then `DICM`. */
const DICOM_MAGIC_OFFSET = 128;

/** How to turn a slide we refuse into one we read; OME-TIFF is read natively. */
const convert =
  'convert it to OME-TIFF first (bioformats2raw then raw2ometiff, or `vips tiffsave` through ' +
  'OpenSlide where OpenSlide reads the format) and upload the .ome.tif';

/**
 * Whole-slide formats that are refused by name: their pixels live in several files (MIRAX,
 * Olympus VSI, Hamamatsu VMS) or in a container no reader here opens (Sakura SVSLIDE, an SQLite
 * database). Each is known by its extension or, where it has one, its signature.
 */
const refusedFormats: ReadonlyArray<{ name: string; extensions: string[]; signature?: string; why: string }> =
  [
    {
      name: 'MIRAX (3DHISTECH .mrxs)',
      extensions: ['.mrxs'],
      signature: '[GENERAL]',
      why: 'its pixels are in the data folder beside the .mrxs, which one upload cannot carry',
    },
    {
      name: 'Olympus VSI',
      extensions: ['.vsi', '.ets'],
      why: 'its pixels are in the .ets files of the folder beside the .vsi, which one upload cannot carry',
    },
    {
      name: 'Hamamatsu VMS',
      extensions: ['.vms', '.vmu'],
      signature: '[Virtual Microscope Specimen]',
      why: 'its pixels are in the JPEG files listed beside it, which one upload cannot carry',
    },
    {
      name: 'Sakura SVSLIDE',
      extensions: ['.svslide'],
      signature: 'SQLite format 3',
      why: 'it is an SQLite database, which no reader of this service opens',
    },
  ];

function refusedFormatOf(head: Uint8Array, filename: string | undefined) {
  const lower = filename?.toLowerCase() ?? '';
  const text = ascii(head.subarray(0, 64)).replace(/^\xEF\xBB\xBF/, '');
  return refusedFormats.find(
    ({ extensions, signature }) =>
      extensions.some((extension) => lower.endsWith(extension)) ||
      (signature !== undefined && text.startsWith(signature)),
  );
}

/**
 * Which reader a file needs, from its first bytes (and, for formats refused by name, its
 * filename). Anything else is refused here with a message a person can act on, before any
 * parser sees it.
 */
export async function detectSlideFormat(
  source: ByteSource,
  signal?: AbortSignal,
  filename?: string,
): Promise<SlideFormat> {
  if (source.size === 0) throw new ComputeError('NotTiff', 'the file is empty (0 bytes)');
  const head = await source.read(0, Math.min(source.size, DICOM_MAGIC_OFFSET + 4), signal);
  const refused = refusedFormatOf(head, filename);
  if (refused !== undefined) {
    throw new ComputeError(
      'UnsupportedFormat',
      `${refused.name} slides are not read here: ${refused.why}; ${convert}`,
    );
  }
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
