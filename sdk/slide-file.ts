import type { ByteSource } from './upload';

/** Enough for TIFF's byte order and version, and for DICOM Part 10's `DICM` after its 128-byte preamble. */
const HEAD_BYTES = 132;
const DICOM_MAGIC_OFFSET = 128;

/** Formats the service refuses by name: their pixels are in other files, or in a database. */
const refusedExtensions = ['.mrxs', '.vsi', '.ets', '.vms', '.vmu', '.svslide'];

/**
 * Why a file cannot be a slide the service reads, found from its name and first bytes before
 * any byte goes out; undefined when it may be one. The service would take every byte, then fail
 * the sample for the same reason. Ingest decides (compute/slide/format.ts); a unit test holds
 * this first look to agree with it on every kind of file.
 */
export async function slideFileProblem(source: ByteSource): Promise<string | undefined> {
  if (source.size === 0) return 'empty (0 bytes)';
  const name = source.name.toLowerCase();
  const refused = refusedExtensions.find((extension) => name.endsWith(extension));
  if (refused)
    return `a ${refused} slide, whose pixels are in other files or a database, which the service does not read: convert it to OME-TIFF and upload that`;
  const length = Math.min(source.size, HEAD_BYTES);
  const head = new Uint8Array(await new Response(source.slice(0, length)).arrayBuffer());
  if (isTiffHeader(head) || isDicomPart10(head)) return undefined;
  return 'not a whole-slide image the service reads (a TIFF-family slide such as SVS, NDPI or OME-TIFF, or a DICOM WSI instance)';
}

function isTiffHeader(head: Uint8Array): boolean {
  const order = String.fromCharCode(head[0] ?? 0, head[1] ?? 0);
  if (head.length < 4 || (order !== 'II' && order !== 'MM')) return false;
  const version = order === 'II' ? head[2]! | (head[3]! << 8) : (head[2]! << 8) | head[3]!;
  // 42: classic TIFF; 43: BigTIFF.
  return version === 42 || version === 43;
}

function isDicomPart10(head: Uint8Array): boolean {
  return String.fromCharCode(...head.subarray(DICOM_MAGIC_OFFSET, DICOM_MAGIC_OFFSET + 4)) === 'DICM';
}
