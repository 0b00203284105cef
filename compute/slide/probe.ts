import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import { type IfdPath, type OpenTiffOptions, openTiff, Tag, type TiffFile, type TiffIfd } from '../tiff';
import { aperioImageKind, isAperioDescription, parseAperioDescription } from './aperio';
import { effectiveMppOf, type Mpp, mppOf, omeLengthToMicrons, resolutionToMpp } from './calibration';
import { isOmeXml, omeImageNames, omePixels } from './ome';

export type SlideVendor = 'aperio' | 'hamamatsu' | 'ome' | 'generic-tiff';
export type AssociatedKind = 'label' | 'macro' | 'thumbnail';

export interface SlideLevel {
  index: number;
  /** The IFD that holds this level (see `ifdAt`). */
  ifd: IfdPath;
  widthPx: number;
  heightPx: number;
  tileWidth: number;
  tileHeight: number;
  /** TIFF compression code (7 JPEG, 33003/33005 Aperio JPEG 2000, 1 none, …). */
  compression: number;
  /** Level 0 size over this level's, averaged over both axes as OpenSlide does. */
  downsample: number;
}

export interface SlideProbe {
  vendor: SlideVendor;
  widthPx: number;
  heightPx: number;
  /** Largest first; associated images are never levels. */
  levels: SlideLevel[];
  /** Calibration as recorded, per axis; null when the file has no usable scale. */
  mpp: Mpp | null;
  /** The scale the pipeline uses: null when unknown or anisotropic. */
  effectiveMpp: number | null;
  associated: Partial<Record<AssociatedKind, IfdPath>>;
  /** Vendor and TIFF properties worth keeping, OpenSlide-style names (`aperio.AppMag`). */
  metadata: Record<string, string>;
}

/** Which IFDs are pyramid levels and which are associated images. */
export interface SlideLayout {
  levels: TiffIfd[];
  associated: Map<AssociatedKind, TiffIfd>;
}

export async function probeSlide(source: ByteSource, options: OpenTiffOptions = {}): Promise<SlideProbe> {
  return probeTiff(await openTiff(source, options));
}

/** Probes an already parsed TIFF (de-identification parses once and probes the same tree). */
export function probeTiff(tiff: TiffFile): SlideProbe {
  const vendor = detectVendor(tiff);
  const layout = slideLayout(tiff, vendor);
  const base = layout.levels[0];
  if (base === undefined) throw new ComputeError('MalformedTiff', 'the file has no pyramid level');
  const mpp = calibrate(base, vendor);
  const associated: SlideProbe['associated'] = {};
  for (const [kind, ifd] of layout.associated) associated[kind] = ifd.path;
  return {
    vendor,
    widthPx: base.width,
    heightPx: base.height,
    levels: layout.levels.map((ifd, index) => levelOf(ifd, index, base)),
    mpp,
    effectiveMpp: effectiveMppOf(mpp),
    associated,
    metadata: metadataOf(base, vendor),
  };
}

export function detectVendor(tiff: TiffFile): SlideVendor {
  const first = tiff.ifds[0];
  if (first === undefined) throw new ComputeError('MalformedTiff', 'the file has no IFD');
  if (isAperioDescription(first.description)) return 'aperio';
  if (first.has(Tag.NdpiFormatFlag)) return 'hamamatsu';
  if (isOmeXml(first.description)) return 'ome';
  return 'generic-tiff';
}

export function slideLayout(tiff: TiffFile, vendor: SlideVendor): SlideLayout {
  const layout =
    vendor === 'aperio'
      ? aperioLayout(tiff)
      : vendor === 'hamamatsu'
        ? ndpiLayout(tiff)
        : pyramidLayout(tiff);
  layout.levels.sort((a, b) => b.width * b.height - a.width * a.height);
  return layout;
}

/** OpenSlide's rule: every tiled IFD is a level; IFD 1 untiled is the thumbnail; the rest say what they are. */
function aperioLayout(tiff: TiffFile): SlideLayout {
  const layout: SlideLayout = { levels: [], associated: new Map() };
  tiff.ifds.forEach((ifd, index) => {
    if (ifd.isTiled) {
      layout.levels.push(ifd);
      return;
    }
    const named = aperioImageKind(ifd.description ?? '');
    const kind = named ?? (ifd.subfileType === 9 ? 'macro' : index === 1 ? 'thumbnail' : undefined);
    if (isAssociatedKind(kind) && !layout.associated.has(kind)) layout.associated.set(kind, ifd);
  });
  return layout;
}

/** NDPI: SourceLens is the objective per level; -1 marks the macro, -2 the focus map. */
function ndpiLayout(tiff: TiffFile): SlideLayout {
  const layout: SlideLayout = { levels: [], associated: new Map() };
  for (const ifd of tiff.ifds) {
    const lens = ifd.number(Tag.NdpiSourceLens) ?? 0;
    const focalPlane = ifd.number(Tag.NdpiFocalPlane) ?? 0;
    if (lens > 0 && focalPlane === 0) layout.levels.push(ifd);
    else if (lens === -1 && !layout.associated.has('macro')) layout.associated.set('macro', ifd);
  }
  return layout;
}

/**
 * OME and generic TIFF: level 0 is the first IFD; its SubIFDs are the pyramid when present,
 * else main-chain IFDs shaped like reductions of it. Anything else is associated, named by its
 * OME image name or description, else guessed by shape (a slide-shaped strip is the macro).
 */
function pyramidLayout(tiff: TiffFile): SlideLayout {
  const [base, ...rest] = tiff.ifds;
  if (base === undefined) throw new ComputeError('MalformedTiff', 'the file has no IFD');
  const layout: SlideLayout = { levels: [base], associated: new Map() };
  const fromSubIfds = base.subIfds.length > 0;
  for (const ifd of base.subIfds) if (isReductionOf(base, ifd)) layout.levels.push(ifd);
  const names = isOmeXml(base.description) ? omeImageNames(base.description) : new Map<number, string>();
  rest.forEach((ifd, i) => {
    if (!fromSubIfds && isReductionOf(base, ifd) && !names.has(i + 1)) {
      layout.levels.push(ifd);
      return;
    }
    const kind = associatedKindOf(ifd, names.get(i + 1));
    if (kind !== undefined && !layout.associated.has(kind)) layout.associated.set(kind, ifd);
  });
  return layout;
}

function associatedKindOf(ifd: TiffIfd, omeName: string | undefined): AssociatedKind | undefined {
  const text = `${omeName ?? ''} ${ifd.description ?? ''}`.toLowerCase();
  if (text.includes('label')) return 'label';
  if (text.includes('macro') || text.includes('overview')) return 'macro';
  if (text.includes('thumbnail')) return 'thumbnail';
  const aspect = Math.max(ifd.width, ifd.height) / Math.min(ifd.width, ifd.height);
  return aspect >= 2 ? 'macro' : 'label';
}

function isAssociatedKind(kind: string | undefined): kind is AssociatedKind {
  return kind === 'label' || kind === 'macro' || kind === 'thumbnail';
}

/** Same aspect as `base` up to rounding, and no larger: what a pyramid level looks like. */
function isReductionOf(base: TiffIfd, ifd: TiffIfd): boolean {
  if (ifd.width > base.width || ifd.height > base.height) return false;
  const expectedHeight = (ifd.width * base.height) / base.width;
  return Math.abs(ifd.height - expectedHeight) <= Math.max(2, 0.02 * expectedHeight);
}

function levelOf(ifd: TiffIfd, index: number, base: TiffIfd): SlideLevel {
  return {
    index,
    ifd: ifd.path,
    widthPx: ifd.width,
    heightPx: ifd.height,
    tileWidth: ifd.tileWidth,
    tileHeight: ifd.tileHeight,
    compression: ifd.compression,
    downsample: (base.width / ifd.width + base.height / ifd.height) / 2,
  };
}

/** The vendor's own scale first (SVS MPP, OME PhysicalSize), else the TIFF resolution tags. */
function calibrate(base: TiffIfd, vendor: SlideVendor): Mpp | null {
  const own = vendor === 'aperio' ? aperioMpp(base) : vendor === 'ome' ? omeMpp(base) : null;
  return own ?? tiffMpp(base);
}

function aperioMpp(base: TiffIfd): Mpp | null {
  const { properties } = parseAperioDescription(base.description ?? '');
  const value = properties.find(({ key }) => key === 'MPP')?.value;
  const mpp = value === undefined || value.trim() === '' ? null : Number(value);
  return mppOf(mpp, mpp);
}

function omeMpp(base: TiffIfd): Mpp | null {
  const pixels = omePixels(base.description ?? '');
  if (pixels === undefined) return null;
  return mppOf(
    omeLengthToMicrons(pixels.PhysicalSizeX, pixels.PhysicalSizeXUnit),
    omeLengthToMicrons(pixels.PhysicalSizeY, pixels.PhysicalSizeYUnit),
  );
}

function tiffMpp(base: TiffIfd): Mpp | null {
  const unit = base.resolutionUnit;
  return mppOf(resolutionToMpp(base.xResolution, unit), resolutionToMpp(base.yResolution, unit));
}

function metadataOf(base: TiffIfd, vendor: SlideVendor): Record<string, string> {
  const metadata: Record<string, string> = {};
  const put = (key: string, value: string | number | undefined) => {
    if (value !== undefined) metadata[key] = String(value);
  };
  put('tiff.Make', base.text(Tag.Make));
  put('tiff.Model', base.text(Tag.Model));
  put('tiff.XResolution', base.xResolution);
  put('tiff.YResolution', base.yResolution);
  put('tiff.ResolutionUnit', base.resolutionUnit);
  if (vendor === 'aperio') {
    for (const { key, value } of parseAperioDescription(base.description ?? '').properties)
      put(`aperio.${key}`, value);
  }
  if (vendor === 'hamamatsu') put('hamamatsu.SourceLens', base.number(Tag.NdpiSourceLens));
  if (vendor === 'ome') {
    for (const [key, value] of Object.entries(omePixels(base.description ?? '') ?? {}))
      put(`ome.Pixels.${key}`, value);
  }
  return metadata;
}
