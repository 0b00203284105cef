import { decodeJpeg, decodeJpeg2000, type Jpeg2000Options, type JpegOptions } from '../decode';
import { ComputeError, isComputeError } from '../errors';
import type { RgbImage } from '../image';
import type { DicomFile } from './parse';
import { readFrame } from './pixels';
import type { WsiGeometry } from './probe';

/** Decodes frame `index` (0-based) to RGB at the frame size the file declares. */
export async function decodeFrame(
  file: DicomFile,
  geometry: WsiGeometry,
  index: number,
  signal?: AbortSignal,
): Promise<RgbImage> {
  const pixels = file.pixelData;
  const { frameWidth: width, frameHeight: height, probe } = geometry;
  let image: RgbImage;
  if (pixels === undefined) throw new ComputeError('MalformedDicom', 'the instance has no pixel data');
  if (pixels.kind === 'native') {
    const bytesPerFrame = width * height * probe.samplesPerPixel;
    const offset = pixels.element.valueOffset + index * bytesPerFrame;
    image = nativeToRgb(await file.source.read(offset, bytesPerFrame, signal), geometry);
  } else {
    const range = pixels.frames[index];
    if (range === undefined) throw new RangeError(`frame ${index} of ${pixels.frames.length}`);
    const bytes = await readFrame(file.source, range, signal);
    image = await decodeCompressed(file, geometry, bytes);
  }
  if (image.width !== width || image.height !== height) {
    throw new ComputeError(
      'CorruptTile',
      `frame ${index} decodes to ${image.width} x ${image.height}, the file declares ${width} x ${height}`,
    );
  }
  if (probe.photometric === 'MONOCHROME1') invert(image.data);
  return image;
}

/**
 * Both decoders check the stream's own size against ours before allocating for it. Their
 * errors speak of tiles and TIFF; a frame the codec cannot handle is an UnsupportedDicom here.
 */
async function decodeCompressed(
  file: DicomFile,
  { frameWidth: width, frameHeight: height, probe }: WsiGeometry,
  bytes: Uint8Array,
): Promise<RgbImage> {
  try {
    return file.codec === 'jpeg'
      ? await decodeJpeg(bytes, { colorSpace: jpegColorSpace(probe.photometric, bytes), width, height })
      : await decodeJpeg2000(bytes, { colorSpace: jpeg2000ColorSpace(probe.photometric), width, height });
  } catch (err) {
    if (isComputeError(err, 'UnsupportedTiff'))
      throw new ComputeError('UnsupportedDicom', err.message, { cause: err });
    if (isComputeError(err)) throw err;
    throw new ComputeError('CorruptTile', `a frame does not decode: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * DICOM says what a JPEG frame holds through PhotometricInterpretation (PS3.5 8.2.1): RGB means
 * no colour transform. libjpeg decides from the stream instead and takes three components
 * without a JFIF or Adobe marker for YCbCr, which turns such frames (Aperio tiles copied into
 * DICOM) purple. Markers in the stream, or subsampled chroma, still win: nobody subsamples RGB.
 */
export function jpegColorSpace(photometric: string, bytes: Uint8Array): JpegOptions['colorSpace'] {
  if (photometric !== 'RGB') return 'auto';
  const { marked, sampling } = scanJpegHeader(bytes);
  const uniform = sampling.length === 3 && sampling.every((s) => s === sampling[0]);
  return !marked && uniform ? 'rgb' : 'auto';
}

/** ICT and RCT are inverted by OpenJPEG (the codestream says MCT); YBR_FULL without MCT is ours to convert. */
function jpeg2000ColorSpace(photometric: string): Jpeg2000Options['colorSpace'] {
  return photometric === 'YBR_FULL' || photometric === 'YBR_FULL_422' ? 'ycbcr' : 'rgb';
}

/** Marker segments up to the first scan: whether JFIF (APP0) or Adobe (APP14) speak, and the sampling. */
function scanJpegHeader(bytes: Uint8Array): { marked: boolean; sampling: number[] } {
  let marked = false;
  let sampling: number[] = [];
  let at = 2;
  while (at + 4 <= bytes.length && bytes[at] === 0xff) {
    const marker = bytes[at + 1] ?? 0;
    if (marker === 0xda || marker === 0xd9) break;
    const length = ((bytes[at + 2] ?? 0) << 8) | (bytes[at + 3] ?? 0);
    const body = bytes.subarray(at + 4, at + 2 + length);
    const name = String.fromCharCode(...body.subarray(0, 5));
    if ((marker === 0xe0 && name === 'JFIF\0') || (marker === 0xee && name === 'Adobe')) marked = true;
    // SOF0..SOF3: the frame header of the processes a DICOM JPEG frame may use.
    if (marker >= 0xc0 && marker <= 0xc3) {
      sampling = Array.from({ length: body[5] ?? 0 }, (_, c) => body[6 + c * 3 + 1] ?? 0);
    }
    at += 2 + length;
  }
  return { marked, sampling };
}

/** Native frames: RGB interleaved (zero-copy), RGB planar, or grey repeated into RGB. */
function nativeToRgb(
  bytes: Uint8Array,
  { frameWidth: width, frameHeight: height, probe, planar }: WsiGeometry,
): RgbImage {
  const pixels = width * height;
  if (probe.samplesPerPixel === 3 && !planar) return { data: bytes, width, height };
  const data = new Uint8Array(pixels * 3);
  if (probe.samplesPerPixel === 3) {
    for (let i = 0; i < pixels; i++) {
      data[i * 3] = bytes[i] ?? 0;
      data[i * 3 + 1] = bytes[pixels + i] ?? 0;
      data[i * 3 + 2] = bytes[2 * pixels + i] ?? 0;
    }
  } else {
    for (let i = 0; i < pixels; i++) data.fill(bytes[i] ?? 0, i * 3, i * 3 + 3);
  }
  return { data, width, height };
}

function invert(data: Uint8Array): void {
  for (let i = 0; i < data.length; i++) data[i] = 255 - (data[i] ?? 0);
}
