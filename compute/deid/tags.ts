import { FieldType, fieldSize, Tag } from '../tiff';

/** Tags the writer rebuilds itself: their values are file offsets or scrubbed text. */
export const rewrittenTags: ReadonlySet<number> = new Set([
  Tag.ImageDescription,
  Tag.StripOffsets,
  Tag.StripByteCounts,
  Tag.TileOffsets,
  Tag.TileByteCounts,
  Tag.SubIFDs,
]);

/** Names, dates, software and free text that can identify a patient, a person or a site. */
const identifyingTags: ReadonlySet<number> = new Set([
  Tag.DocumentName,
  Tag.PageName,
  Tag.Software,
  Tag.DateTime,
  Tag.Artist,
  Tag.HostComputer,
  Tag.XMP,
  Tag.Copyright,
  Tag.IPTC,
  Tag.Photoshop,
  Tag.ImageUniqueID,
]);

/**
 * Offsets into the old file that the copy would leave dangling (and that may point at unscrubbed
 * data): EXIF/GPS directories, free space, old-style JPEG streams.
 */
const pointerTags: ReadonlySet<number> = new Set([
  Tag.FreeOffsets,
  Tag.FreeByteCounts,
  Tag.JPEGInterchangeFormat,
  Tag.JPEGInterchangeFormatLength,
  Tag.ExifIFD,
  Tag.GPSIFD,
  Tag.InteroperabilityIFD,
]);

/**
 * Private tags (32768 and up) are kept only when known to be harmless: the ICC profile, SGI
 * depth tags and the NDPI tags OpenSlide reads (format flag, objective, stage offsets, focal
 * plane, MCU starts, which are relative to their strip). NDPI's slide label (65427), scanner
 * serial (65442) and property map (65449), and every unknown private tag, are dropped.
 */
const safePrivateTags: ReadonlySet<number> = new Set([
  32997, // ImageDepth
  32998, // TileDepth
  Tag.ICCProfile,
  Tag.NdpiFormatFlag,
  Tag.NdpiSourceLens,
  65422, // NDPI X offset from slide centre
  65423, // NDPI Y offset from slide centre
  Tag.NdpiFocalPlane,
  Tag.NdpiMcuStarts,
  65432, // NDPI McuStarts high bytes
]);

export type TagDecision = 'copy' | 'rewrite' | 'drop';

export function decideTag(tag: number, type: number): TagDecision {
  if (rewrittenTags.has(tag)) return 'rewrite';
  if (identifyingTags.has(tag) || pointerTags.has(tag)) return 'drop';
  // An unknown type has an unknown size; an IFD-typed value is an offset we would not relocate.
  if (fieldSize(type) === undefined || type === FieldType.IFD || type === FieldType.IFD8) return 'drop';
  if (tag >= 32768 && !safePrivateTags.has(tag)) return 'drop';
  return 'copy';
}
