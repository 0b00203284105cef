/** TIFF tag numbers this code reads or writes by name (TIFF 6.0, TIFF/EP, Adobe notes, vendors). */
export const Tag = {
  NewSubfileType: 254,
  SubfileType: 255,
  ImageWidth: 256,
  ImageLength: 257,
  BitsPerSample: 258,
  Compression: 259,
  Photometric: 262,
  DocumentName: 269,
  ImageDescription: 270,
  Make: 271,
  Model: 272,
  StripOffsets: 273,
  SamplesPerPixel: 277,
  RowsPerStrip: 278,
  StripByteCounts: 279,
  XResolution: 282,
  YResolution: 283,
  PlanarConfiguration: 284,
  PageName: 285,
  FreeOffsets: 288,
  FreeByteCounts: 289,
  ResolutionUnit: 296,
  Software: 305,
  DateTime: 306,
  Artist: 315,
  HostComputer: 316,
  TileWidth: 322,
  TileLength: 323,
  TileOffsets: 324,
  TileByteCounts: 325,
  SubIFDs: 330,
  JPEGTables: 347,
  JPEGInterchangeFormat: 513,
  JPEGInterchangeFormatLength: 514,
  XMP: 700,
  Copyright: 33432,
  IPTC: 33723,
  Photoshop: 34377,
  ExifIFD: 34665,
  ICCProfile: 34675,
  GPSIFD: 34853,
  InteroperabilityIFD: 40965,
  ImageUniqueID: 42016,
  NdpiFormatFlag: 65420,
  NdpiSourceLens: 65421,
  NdpiFocalPlane: 65424,
  NdpiMcuStarts: 65426,
  NdpiReference: 65427,
  NdpiScannerSerial: 65442,
  NdpiPropertyMap: 65449,
} as const;

const tagNames = new Map<number, string>(Object.entries(Tag).map(([name, tag]) => [tag, name]));

/** A readable name for reports: the known name, or the number. */
export function tagName(tag: number): string {
  return tagNames.get(tag) ?? String(tag);
}

/** TIFF field types (TIFF 6.0 section 2, BigTIFF adds 16-18). */
export const FieldType = {
  BYTE: 1,
  ASCII: 2,
  SHORT: 3,
  LONG: 4,
  RATIONAL: 5,
  SBYTE: 6,
  UNDEFINED: 7,
  SSHORT: 8,
  SLONG: 9,
  SRATIONAL: 10,
  FLOAT: 11,
  DOUBLE: 12,
  IFD: 13,
  LONG8: 16,
  SLONG8: 17,
  IFD8: 18,
} as const;

const fieldSizes = new Map<number, number>([
  [FieldType.BYTE, 1],
  [FieldType.ASCII, 1],
  [FieldType.SHORT, 2],
  [FieldType.LONG, 4],
  [FieldType.RATIONAL, 8],
  [FieldType.SBYTE, 1],
  [FieldType.UNDEFINED, 1],
  [FieldType.SSHORT, 2],
  [FieldType.SLONG, 4],
  [FieldType.SRATIONAL, 8],
  [FieldType.FLOAT, 4],
  [FieldType.DOUBLE, 8],
  [FieldType.IFD, 4],
  [FieldType.LONG8, 8],
  [FieldType.SLONG8, 8],
  [FieldType.IFD8, 8],
]);

/** Bytes per value of a field type, or undefined for a type TIFF does not define. */
export function fieldSize(type: number): number | undefined {
  return fieldSizes.get(type);
}

/** Tags whose arrays grow with the image (one value per tile or strip): loaded only on demand. */
export const blockArrayTags: ReadonlySet<number> = new Set([
  Tag.StripOffsets,
  Tag.StripByteCounts,
  Tag.TileOffsets,
  Tag.TileByteCounts,
]);

export const Compression = {
  None: 1,
  LZW: 5,
  OldJPEG: 6,
  JPEG: 7,
  Deflate: 8,
  AperioJP2kYCbCr: 33003,
  AperioJP2kRGB: 33005,
} as const;

export const ResolutionUnit = { None: 1, Inch: 2, Centimeter: 3 } as const;
