import { ComputeError } from '../errors';
import type { AssociatedKind, SlideLayout, SlideVendor } from '../slide';
import { scrubLeicaXml } from '../slide/leica';
import { scrubIScanXmp, scrubVentanaXmp, ventanaLevelOf, xmpText } from '../slide/ventana';
import { Compression, type IfdPath, Tag, type TiffFile, type TiffIfd, tagName } from '../tiff';
import { scrubDescription } from './description';
import type { PlannedIfd } from './layout';
import { decideTag } from './tags';

export interface DroppedImage {
  ifd: IfdPath;
  kind: AssociatedKind | 'other';
  widthPx: number;
  heightPx: number;
}

export interface DeidPlan {
  roots: PlannedIfd[];
  droppedImages: DroppedImage[];
  droppedTags: Set<string>;
  scrubbed: Set<string>;
}

/** Levels always stay; a thumbnail is pixels of tissue only; labels, macros and the unknown go. */
function keptIfds(layout: SlideLayout): Set<TiffIfd> {
  const kept = new Set(layout.levels);
  const thumbnail = layout.associated.get('thumbnail');
  if (thumbnail !== undefined) kept.add(thumbnail);
  return kept;
}

function kindOf(ifd: TiffIfd, layout: SlideLayout): DroppedImage['kind'] {
  for (const [kind, associated] of layout.associated) if (associated === ifd) return kind;
  return 'other';
}

const encoder = new TextEncoder();

/** Decides every IFD and tag of the copy and loads what it copies; reads no tile. */
export async function planDeid(
  tiff: TiffFile,
  layout: SlideLayout,
  vendor: SlideVendor,
  signal?: AbortSignal,
): Promise<DeidPlan> {
  const kept = keptIfds(layout);
  const plan: DeidPlan = { roots: [], droppedImages: [], droppedTags: new Set(), scrubbed: new Set() };
  const ifdRenumbering = new Map<number, number>();
  tiff.ifds.forEach((ifd, index) => {
    if (kept.has(ifd)) ifdRenumbering.set(index, ifdRenumbering.size);
  });
  const planIfd = async (ifd: TiffIfd): Promise<PlannedIfd | undefined> => {
    if (!kept.has(ifd)) {
      plan.droppedImages.push({
        ifd: ifd.path,
        kind: kindOf(ifd, layout),
        widthPx: ifd.width,
        heightPx: ifd.height,
      });
      return undefined;
    }
    if (ifd.compression === Compression.OldJPEG) {
      // Its stream hangs off JPEGInterchangeFormat, an offset the copy does not carry over.
      throw new ComputeError('UnsupportedTiff', `IFD ${ifd.path.join('/')} uses old-style JPEG`);
    }
    const copied = [];
    for (const entry of ifd.entries.values()) {
      const decision = isPhilipsSoftware(ifd, entry.tag, vendor) ? 'copy' : decideTag(entry.tag, entry.type);
      if (decision === 'drop') plan.droppedTags.add(tagName(entry.tag));
      if (decision !== 'copy') continue;
      await ifd.load(entry.tag, signal);
      copied.push(entry);
    }
    const children: PlannedIfd[] = [];
    for (const sub of ifd.subIfds) {
      const child = await planIfd(sub);
      if (child !== undefined) children.push(child);
    }
    return {
      source: ifd,
      copied,
      description: encodeText(vendorDescription(ifd) ?? scrubbedDescription(ifd, ifdRenumbering, plan)),
      xmp: encodeText(vendor === 'ventana' ? ventanaXmp(ifd) : undefined),
      ...(await blocksOf(ifd, signal)),
      children,
    };
  };
  const firstKept = tiff.ifds.find((ifd) => kept.has(ifd));
  /** SCN XML lives in the first IFD, the macro's: the copy's first IFD carries it, scrubbed. */
  const vendorDescription = (ifd: TiffIfd): string | undefined => {
    if (vendor !== 'leica' || ifd !== firstKept) return undefined;
    const { text, removed } = scrubLeicaXml(tiff.ifds[0]?.description ?? '', ifdRenumbering);
    for (const what of removed) plan.scrubbed.add(what);
    return text;
  };
  /**
   * BIF level 0 keeps its stitching and scale (see scrubVentanaXmp), and the copy's first IFD
   * the scrubbed iScan packet OpenSlide tells a BIF by; no other XMP is kept.
   */
  const ventanaXmp = (ifd: TiffIfd): string | undefined => {
    const macroXmp = xmpText(layout.associated.get('macro')?.entries.get(Tag.XMP)?.raw);
    const encodeInfo = xmpText(ifd.entries.get(Tag.XMP)?.raw);
    const scrubbed =
      ventanaLevelOf(ifd.description)?.level === 0 && encodeInfo !== undefined
        ? scrubVentanaXmp(encodeInfo, macroXmp)
        : ifd === firstKept
          ? scrubIScanXmp(macroXmp)
          : undefined;
    for (const what of scrubbed?.removed ?? []) plan.scrubbed.add(what);
    return scrubbed?.text;
  };
  for (const ifd of tiff.ifds) {
    const root = await planIfd(ifd);
    if (root !== undefined) plan.roots.push(root);
  }
  return plan;
}

function scrubbedDescription(ifd: TiffIfd, ifdRenumbering: Map<number, number>, plan: DeidPlan) {
  const description = ifd.description;
  if (description === undefined) return undefined;
  const { text, removed } = scrubDescription(description, { ifdRenumbering });
  for (const what of removed) plan.scrubbed.add(what);
  return text;
}

function encodeText(text: string | undefined): Uint8Array | undefined {
  return text === undefined ? undefined : encoder.encode(`${text}\0`);
}

/**
 * OpenSlide tells a Philips TIFF by its Software tag, `Philips DP v1.0`: a product and version,
 * kept exactly when it says nothing more.
 */
function isPhilipsSoftware(ifd: TiffIfd, tag: number, vendor: SlideVendor): boolean {
  return (
    vendor === 'philips' && tag === Tag.Software && /^Philips DP v[\d.]+$/.test(ifd.text(Tag.Software) ?? '')
  );
}

/** Checked before a byte is written, so a bad offset fails the copy instead of truncating it. */
async function blocksOf(ifd: TiffIfd, signal?: AbortSignal) {
  const [blockOffsets, blockCounts] = await Promise.all([
    ifd.tileOffsets(signal),
    ifd.tileByteCounts(signal),
  ]);
  const size = ifd.context.source.size;
  const n = ifd.tileCount;
  for (let i = 0; i < n; i++) {
    const end = (blockOffsets[i] ?? 0) + (blockCounts[i] ?? 0);
    if (end > size) {
      throw new ComputeError(
        'MalformedTiff',
        `tile ${i} of IFD ${ifd.path.join('/')} ends at ${end}, past the end`,
      );
    }
  }
  return { blockOffsets: blockOffsets.slice(0, n), blockCounts: blockCounts.slice(0, n) };
}
