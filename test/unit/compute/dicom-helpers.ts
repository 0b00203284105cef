import * as path from 'node:path';
import { parseDicom, TransferSyntax, tagOf } from '../../../compute/dicom';
import { bytesSource } from '../../../compute/source';
import { wsiDir } from './helpers';

export const dicomLevel0 = path.join(wsiDir, 'dicom/CMU-1-Small-Region/level-0-frames-0-30.dcm');

/**
 * A DICOM element writer of our own for tests, independent of compute/dicom's: fixtures are
 * built from it, so a shared bug in encoding cannot hide itself.
 */
export interface El {
  tag: number;
  vr: string;
  /** Text (padded here), raw bytes, or items of a sequence. */
  value: string | Uint8Array | El[][];
  /** Sequences and items written with undefined lengths and delimiters. */
  undefinedLength?: boolean;
}

const long = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);

function u16(n: number): number[] {
  return [n & 0xff, (n >>> 8) & 0xff];
}

function u32(n: number): number[] {
  return [...u16(n & 0xffff), ...u16(n >>> 16)];
}

function tagBytes(tag: number): number[] {
  return [...u16(tag >>> 16), ...u16(tag & 0xffff)];
}

function text(vr: string, value: string): Uint8Array {
  const padded = value.length % 2 === 0 ? value : value + (vr === 'UI' ? '\0' : ' ');
  return Uint8Array.from(padded, (c) => c.charCodeAt(0));
}

export function encode(elements: El[], explicit: boolean): Uint8Array {
  return Buffer.concat(elements.map((element) => encodeOne(element, explicit)));
}

function encodeOne({ tag, vr, value, undefinedLength }: El, explicit: boolean): Uint8Array {
  let body: Uint8Array;
  if (Array.isArray(value)) {
    const items = value.map((item) => {
      const content = encode(item, explicit);
      return undefinedLength
        ? Buffer.concat([
            Uint8Array.from([0xfe, 0xff, 0x00, 0xe0, ...u32(0xffffffff)]),
            content,
            delimiter(0xe00d),
          ])
        : Buffer.concat([Uint8Array.from([0xfe, 0xff, 0x00, 0xe0, ...u32(content.byteLength)]), content]);
    });
    body = Buffer.concat([...items, ...(undefinedLength ? [delimiter(0xe0dd)] : [])]);
  } else {
    body = typeof value === 'string' ? text(vr, value) : value;
  }
  // A non-sequence value with undefined length (encapsulated pixel data) brings its own delimiter.
  const length = undefinedLength ? 0xffffffff : body.byteLength;
  const vrBytes = [vr.charCodeAt(0), vr.charCodeAt(1)];
  const header = !explicit
    ? [...tagBytes(tag), ...u32(length)]
    : long.has(vr)
      ? [...tagBytes(tag), ...vrBytes, 0, 0, ...u32(length)]
      : [...tagBytes(tag), ...vrBytes, ...u16(length)];
  return Buffer.concat([Uint8Array.from(header), body]);
}

function delimiter(element: number): Uint8Array {
  return Uint8Array.from([0xfe, 0xff, ...u16(element), 0, 0, 0, 0]);
}

export function us(n: number): Uint8Array {
  return Uint8Array.from(u16(n));
}

export function ul(n: number): Uint8Array {
  return Uint8Array.from(u32(n));
}

export function sl(n: number): Uint8Array {
  return Uint8Array.from(u32(n >>> 0));
}

/** A Part 10 file: preamble, meta group (explicit, with its group length), dataset. */
export function part10(
  transferSyntax: string,
  dataset: Uint8Array,
  sopClass = '1.2.840.10008.5.1.4.1.1.77.1.6',
) {
  const meta = encode(
    [
      { tag: tagOf(2, 1), vr: 'OB', value: Uint8Array.of(0, 1) },
      { tag: tagOf(2, 2), vr: 'UI', value: sopClass },
      { tag: tagOf(2, 3), vr: 'UI', value: '1.2.3.4' },
      { tag: tagOf(2, 0x10), vr: 'UI', value: transferSyntax },
    ],
    true,
  );
  const groupLength = encode([{ tag: tagOf(2, 0), vr: 'UL', value: ul(meta.byteLength) }], true);
  return Buffer.concat([new Uint8Array(128), Buffer.from('DICM'), groupLength, meta, dataset]);
}

/**
 * Replaces or inserts top-level elements of a Part 10 file (explicit VR), keeping tag order.
 * Splicing is safe for encapsulated pixel data: its offset tables are relative.
 */
export async function withElements(file: Uint8Array, elements: El[]): Promise<Buffer> {
  const parsed = await parseDicom(bytesSource(file));
  let out = Buffer.from(file);
  // Back to front, so earlier offsets stay valid.
  const sorted = [...elements].sort((a, b) => b.tag - a.tag);
  for (const element of sorted) {
    const bytes = encode([element], parsed.explicit);
    const existing = parsed.dataset.elements.find((e) => e.tag === element.tag);
    const next = parsed.dataset.elements.find((e) => e.tag > element.tag);
    const start = existing?.offset ?? next?.offset ?? out.byteLength;
    const end = existing === undefined ? start : existing.valueOffset + existing.length;
    out = Buffer.concat([out.subarray(0, start), bytes, out.subarray(end)]);
  }
  return out;
}

/**
 * Encapsulated pixel data: a Basic Offset Table (filled or empty) and each frame's fragments;
 * `extended` also returns the Extended Offset Table elements that describe them.
 */
export function encapsulate(frames: Uint8Array[][], options: { offsetTable: boolean }): El {
  return encapsulateWithTables(frames, options).pixelData;
}

export function encapsulateWithTables(
  frames: Uint8Array[][],
  options: { offsetTable: boolean },
): { pixelData: El; extended: El[] } {
  const items = frames.map((fragments) =>
    Buffer.concat(
      fragments.map((f) =>
        Buffer.concat([Uint8Array.from([0xfe, 0xff, 0x00, 0xe0, ...u32(f.byteLength)]), f]),
      ),
    ),
  );
  const offsets: number[] = [];
  let at = 0;
  for (const item of items) {
    offsets.push(at);
    at += item.byteLength;
  }
  const table = options.offsetTable ? Uint8Array.from(offsets.flatMap(u32)) : new Uint8Array(0);
  const value = Buffer.concat([
    Uint8Array.from([0xfe, 0xff, 0x00, 0xe0, ...u32(table.byteLength)]),
    table,
    ...items,
    delimiter(0xe0dd),
  ]);
  const u64 = (n: number) => [...u32(n), 0, 0, 0, 0];
  const lengths = items.map((item) => item.byteLength - 8);
  return {
    pixelData: { tag: tagOf(0x7fe0, 0x10), vr: 'OB', value, undefinedLength: true },
    extended: [
      { tag: tagOf(0x7fe0, 0x1), vr: 'OV', value: Uint8Array.from(offsets.flatMap(u64)) },
      { tag: tagOf(0x7fe0, 0x2), vr: 'OV', value: Uint8Array.from(lengths.flatMap(u64)) },
    ],
  };
}

export interface TinyWsi {
  width: number;
  height: number;
  frameWidth: number;
  frameHeight: number;
  /** RGB interleaved (or grey) samples of each frame, in file order. */
  frames: Uint8Array[];
  samplesPerPixel?: 1 | 3;
  photometric?: string;
  explicit?: boolean;
  /** Per-frame 1-based (column, row) positions: makes the image TILED_SPARSE. */
  positions?: Array<[number, number]>;
  imageType?: string;
  /** Top-level elements, in tag order between SOPInstanceUID and DimensionOrganizationType. */
  extra?: El[];
  /** More elements for frame i's per-frame functional group item (sparse only). */
  perFrame?: (frame: number) => El[];
  /** Encapsulated frames (see `encapsulate`) and their transfer syntax, instead of native ones. */
  encapsulated?: { transferSyntax: string; pixelData: El };
}

/** A small native (uncompressed) WSI instance with every attribute the reader needs. */
export function tinyWsi(options: TinyWsi): Uint8Array {
  const explicit = options.explicit ?? true;
  const samples = options.samplesPerPixel ?? 3;
  const pixels = Buffer.concat(options.frames);
  const sparse = options.positions !== undefined;
  const elements: El[] = [
    { tag: tagOf(8, 8), vr: 'CS', value: options.imageType ?? 'ORIGINAL\\PRIMARY\\VOLUME\\NONE' },
    { tag: tagOf(8, 0x16), vr: 'UI', value: '1.2.840.10008.5.1.4.1.1.77.1.6' },
    { tag: tagOf(8, 0x18), vr: 'UI', value: '1.2.3.4' },
    ...(options.extra ?? []),
    { tag: tagOf(0x20, 0x9311), vr: 'CS', value: sparse ? 'TILED_SPARSE' : 'TILED_FULL' },
    { tag: tagOf(0x28, 2), vr: 'US', value: us(samples) },
    { tag: tagOf(0x28, 4), vr: 'CS', value: options.photometric ?? (samples === 3 ? 'RGB' : 'MONOCHROME2') },
    { tag: tagOf(0x28, 6), vr: 'US', value: us(0) },
    { tag: tagOf(0x28, 8), vr: 'IS', value: String(options.frames.length) },
    { tag: tagOf(0x28, 0x10), vr: 'US', value: us(options.frameHeight) },
    { tag: tagOf(0x28, 0x11), vr: 'US', value: us(options.frameWidth) },
    { tag: tagOf(0x28, 0x100), vr: 'US', value: us(8) },
    { tag: tagOf(0x28, 0x101), vr: 'US', value: us(8) },
    { tag: tagOf(0x28, 0x102), vr: 'US', value: us(7) },
    { tag: tagOf(0x28, 0x103), vr: 'US', value: us(0) },
    { tag: tagOf(0x48, 6), vr: 'UL', value: ul(options.width) },
    { tag: tagOf(0x48, 7), vr: 'UL', value: ul(options.height) },
    {
      tag: tagOf(0x5200, 0x9229),
      vr: 'SQ',
      undefinedLength: true,
      value: [
        [
          {
            tag: tagOf(0x28, 0x9110),
            vr: 'SQ',
            value: [[{ tag: tagOf(0x28, 0x30), vr: 'DS', value: '0.00025\\0.00025' }]],
          },
        ],
      ],
    },
    ...(sparse
      ? [
          {
            tag: tagOf(0x5200, 0x9230),
            vr: 'SQ',
            undefinedLength: !explicit,
            value: (options.positions ?? []).map(([column, row], frame): El[] => [
              ...(options.perFrame?.(frame) ?? []),
              {
                tag: tagOf(0x48, 0x21a),
                vr: 'SQ',
                value: [
                  [
                    { tag: tagOf(0x48, 0x21e), vr: 'SL', value: sl(column) },
                    { tag: tagOf(0x48, 0x21f), vr: 'SL', value: sl(row) },
                  ],
                ],
              },
            ]),
          },
        ]
      : []),
    options.encapsulated?.pixelData ?? { tag: tagOf(0x7fe0, 0x10), vr: 'OB', value: pixels },
  ];
  const syntax =
    options.encapsulated?.transferSyntax ??
    (explicit ? TransferSyntax.ExplicitLittle : TransferSyntax.ImplicitLittle);
  return part10(syntax, encode(elements, explicit));
}
