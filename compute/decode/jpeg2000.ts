import type { OpenJpegModule } from '@cornerstonejs/codec-openjpeg/decodewasmjs';
import { ComputeError } from '../errors';
import type { RgbImage } from '../image';
import { expandGrey } from './raw';

export interface Jpeg2000Options {
  /**
   * `ycbcr`: the components are Y, Cb, Cr with no colour transform declared in the codestream
   * (Aperio 33003), so the conversion to RGB is ours. `rgb`: take the components as they decode
   * (Aperio 33005; a codestream with its own MCT is inverted by OpenJPEG itself).
   */
  colorSpace: 'rgb' | 'ycbcr';
  /** The size the container declares; a codestream that disagrees is refused before decoding. */
  width?: number;
  height?: number;
}

/** Decodes one JPEG 2000 codestream (a TIFF tile or a DICOM frame) to interleaved RGB. */
export async function decodeJpeg2000(bytes: Uint8Array, options: Jpeg2000Options): Promise<RgbImage> {
  const size = readSiz(bytes);
  if (
    (options.width !== undefined && size.width !== options.width) ||
    (options.height !== undefined && size.height !== options.height)
  ) {
    throw new ComputeError(
      'CorruptTile',
      `a JPEG 2000 tile is ${size.width} x ${size.height}, the file declares ${options.width} x ${options.height}`,
    );
  }
  const codec = await openJpeg();
  const decoded = decodeWith(codec, bytes);
  if (decoded.components === 1) return expandGrey(decoded.samples, decoded.width, decoded.height);
  const data = options.colorSpace === 'ycbcr' ? ycbcrToRgb(decoded.samples) : decoded.samples;
  return { data, width: decoded.width, height: decoded.height };
}

interface Decoded {
  samples: Uint8Array;
  width: number;
  height: number;
  components: number;
}

/** Header fields checked before any pixel is decoded: a hostile SIZ must not size our buffers. */
interface Siz {
  width: number;
  height: number;
}

function readSiz(bytes: Uint8Array): Siz {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // A raw codestream starts SOC (FF4F) then SIZ (FF51); JP2-wrapped streams are not in TIFF tiles.
  if (bytes.byteLength < 42 || view.getUint16(0) !== 0xff4f || view.getUint16(2) !== 0xff51) {
    throw new ComputeError('CorruptTile', 'a JPEG 2000 tile does not start with SOC and SIZ markers');
  }
  const width = view.getUint32(8) - view.getUint32(16);
  const height = view.getUint32(12) - view.getUint32(20);
  const components = view.getUint16(40);
  if (components !== 1 && components !== 3) {
    throw new ComputeError('UnsupportedTiff', `a JPEG 2000 tile has ${components} components, not 1 or 3`);
  }
  for (let c = 0; c < components; c++) {
    const at = 42 + c * 3;
    if (at + 3 > bytes.byteLength)
      throw new ComputeError('CorruptTile', 'a JPEG 2000 SIZ marker is cut short');
    const depth = ((bytes[at] ?? 0) & 0x7f) + 1;
    const signed = ((bytes[at] ?? 0) & 0x80) !== 0;
    if (depth !== 8 || signed) {
      throw new ComputeError(
        'UnsupportedTiff',
        `a JPEG 2000 tile has ${signed ? 'signed ' : ''}${depth}-bit samples`,
      );
    }
    // The WASM build interleaves components as if all had the image's size; subsampled
    // chroma would come out scrambled, so refuse it rather than return wrong colours.
    if (bytes[at + 1] !== 1 || bytes[at + 2] !== 1) {
      throw new ComputeError('UnsupportedTiff', 'JPEG 2000 with subsampled components is not supported');
    }
  }
  return { width, height };
}

let codecPromise: Promise<OpenJpegModule> | undefined;
/** OpenJPEG reports failures by printing, not throwing: collect what one decode prints. */
let messages: string[] = [];

/** Compiles the WASM module now rather than on the first tile. */
export async function loadJpeg2000Codec(): Promise<void> {
  await openJpeg();
}

/** The WASM module is compiled once per process, on first use, and shared. */
function openJpeg(): Promise<OpenJpegModule> {
  if (codecPromise === undefined) {
    const capture = (text: string) => {
      if (text.includes('[ERROR]')) messages.push(text.replace('[ERROR]', '').trim());
    };
    codecPromise = import('@cornerstonejs/codec-openjpeg/decodewasmjs').then(({ default: factory }) =>
      factory({ print: capture, printErr: capture }),
    );
    // A failed start (missing file, no memory) must not stick for the life of the process.
    codecPromise.catch(() => {
      codecPromise = undefined;
    });
  }
  return codecPromise;
}

/** Synchronous: the decoder and its buffers live in WASM memory and are freed before returning. */
function decodeWith(codec: OpenJpegModule, bytes: Uint8Array): Decoded {
  const decoder = new codec.J2KDecoder();
  messages = [];
  try {
    decoder.getEncodedBuffer(bytes.byteLength).set(bytes);
    decoder.decode();
    const info = decoder.getFrameInfo();
    if (info.width === 0 || info.height === 0) {
      const why = messages.length > 0 ? messages.join('; ') : 'no image';
      throw new ComputeError('CorruptTile', `a JPEG 2000 tile does not decode: ${why}`);
    }
    // The decoded buffer is a view into WASM memory, reused by the next decode: copy it out.
    const samples = decoder.getDecodedBuffer().slice();
    const expected = info.width * info.height * info.componentCount;
    if (samples.byteLength !== expected) {
      throw new ComputeError(
        'CorruptTile',
        `a JPEG 2000 tile decoded to ${samples.byteLength} bytes, not ${expected}`,
      );
    }
    return {
      samples: new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength),
      width: info.width,
      height: info.height,
      components: info.componentCount,
    };
  } finally {
    decoder.delete();
  }
}

/** Fixed-point tables as OpenSlide builds them, so 33003 tiles match its rendering. */
const chroma = (() => {
  const rCr = new Int16Array(256);
  const bCb = new Int16Array(256);
  const gCb = new Int32Array(256);
  const gCr = new Int32Array(256);
  for (let i = 0; i < 256; i++) {
    rCr[i] = Math.round(1.402 * (i - 128));
    bCb[i] = Math.round(1.772 * (i - 128));
    // G needs both chroma terms; keep them in 1/65536 units and round once, per pixel.
    gCb[i] = Math.round(-0.344136 * (i - 128) * 65536);
    gCr[i] = Math.round(-0.714136 * (i - 128) * 65536);
  }
  return { rCr, bCb, gCb, gCr };
})();

/**
 * In place: Aperio 33003 declares YCbCr components that the codestream does not transform.
 * Writing through a clamped view saturates out-of-range values the way libjpeg does.
 */
function ycbcrToRgb(samples: Uint8Array): Uint8Array {
  const { rCr, bCb, gCb, gCr } = chroma;
  const out = new Uint8ClampedArray(samples.buffer, samples.byteOffset, samples.byteLength);
  for (let i = 0; i < samples.length; i += 3) {
    const y = samples[i] ?? 0;
    const cb = samples[i + 1] ?? 0;
    const cr = samples[i + 2] ?? 0;
    out[i] = y + (rCr[cr] ?? 0);
    out[i + 1] = y + (((gCb[cb] ?? 0) + (gCr[cr] ?? 0) + 32768) >> 16);
    out[i + 2] = y + (bCb[cb] ?? 0);
  }
  return samples;
}
