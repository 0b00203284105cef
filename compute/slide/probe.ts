import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import { type IfdPath, type OpenTiffOptions, openTiff, Tag, type TiffFile, type TiffIfd } from '../tiff';
import { aperioImageKind, isAperioDescription, parseAperioDescription } from './aperio';
import { effectiveMppOf, type Mpp, mppOf, omeLengthToMicrons, resolutionToMpp } from './calibration';
import { isLeicaXml, type LeicaSlide, leicaBounds, leicaMpp, parseLeicaXml } from './leica';
import { isOmeXml, omeImageNames, omePixels } from './ome';
import { isPhilipsXml, type PhilipsSlide, parsePhilipsXml } from './philips';
import {
  iScanElement,
  isVentanaMacro,
  parseEncodeInfo,
  parseIScan,
  stitchedLevelSize,
  ventanaLevelOf,
  xmpText,
} from './ventana';

export type SlideVendor = 'aperio' | 'hamamatsu' | 'leica' | 'ventana' | 'philips' | 'ome' | 'generic-tiff';
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

/**
 * The probe of a slide file, refused (`TooLarge`) when level 0 is longer on a side than the
 * service ingests, as DICOM's probe is: ingest records the size before the slide is opened.
 */
export async function probeSlide(source: ByteSource, options: OpenTiffOptions = {}): Promise<SlideProbe> {
  const probe = probeTiff(await openTiff(source, options));
  checkSides(probe);
  return probe;
}

const MAX_SIDE_PX = 200_000;

/** Refuses a level 0 longer on a side than any slide (nor an integer the database holds). */
export function checkSides({ widthPx: w, heightPx: h }: SlideProbe): void {
  if (w > MAX_SIDE_PX || h > MAX_SIDE_PX) {
    throw new ComputeError('TooLarge', `level 0 is ${w} x ${h} pixels; the limit is ${MAX_SIDE_PX} per side`);
  }
}

/** Probes an already parsed TIFF (de-identification parses once and probes the same tree). */
export function probeTiff(tiff: TiffFile): SlideProbe {
  const vendor = detectVendor(tiff);
  const layout = slideLayout(tiff, vendor);
  const base = layout.levels[0];
  if (base === undefined) throw new ComputeError('MalformedTiff', 'the file has no pyramid level');
  const sizes = levelSizes(tiff, vendor, layout.levels);
  const mpp = calibrate(tiff, base, vendor);
  const associated: SlideProbe['associated'] = {};
  for (const [kind, ifd] of layout.associated) associated[kind] = ifd.path;
  return {
    vendor,
    widthPx: sizes[0]!.width,
    heightPx: sizes[0]!.height,
    levels: layout.levels.map((ifd, index) => levelOf(ifd, index, sizes)),
    mpp,
    effectiveMpp: effectiveMppOf(mpp),
    associated,
    metadata: metadataOf(tiff, base, vendor),
  };
}

export function detectVendor(tiff: TiffFile): SlideVendor {
  const first = tiff.ifds[0];
  if (first === undefined) throw new ComputeError('MalformedTiff', 'the file has no IFD');
  if (isAperioDescription(first.description)) return 'aperio';
  if (first.has(Tag.NdpiFormatFlag)) return 'hamamatsu';
  if (isLeicaXml(first.description)) return 'leica';
  if (isPhilipsXml(first.description)) return 'philips';
  if (isOmeXml(first.description)) return 'ome';
  if (tiff.ifds.some((ifd) => ventanaLevelOf(ifd.description) !== undefined)) return 'ventana';
  return 'generic-tiff';
}

export function slideLayout(tiff: TiffFile, vendor: SlideVendor): SlideLayout {
  const layouts: Partial<Record<SlideVendor, (tiff: TiffFile) => SlideLayout>> = {
    aperio: aperioLayout,
    hamamatsu: ndpiLayout,
    leica: leicaLayout,
    ventana: ventanaLayout,
    philips: philipsLayout,
  };
  const layout = (layouts[vendor] ?? pyramidLayout)(tiff);
  layout.levels.sort((a, b) => b.width * b.height - a.width * a.height);
  return layout;
}

/** The main image's resolutions are the levels; the macro's largest is the macro. */
function leicaLayout(tiff: TiffFile): SlideLayout {
  const slide = leicaOf(tiff);
  const ifdOf = (ifd: number) => {
    const found = tiff.ifds[ifd];
    if (found === undefined)
      throw new ComputeError('MalformedTiff', `the SCN XML names IFD ${ifd}, which is absent`);
    return found;
  };
  const layout: SlideLayout = {
    levels: slide.main.dimensions.map(({ ifd }) => ifdOf(ifd)),
    associated: new Map(),
  };
  const macro = slide.macro?.dimensions[0];
  if (macro !== undefined) layout.associated.set('macro', ifdOf(macro.ifd));
  return layout;
}

/** Levels say `level=N mag=M`; the `Label Image` is the slide photograph (OpenSlide's macro). */
function ventanaLayout(tiff: TiffFile): SlideLayout {
  const layout: SlideLayout = { levels: [], associated: new Map() };
  for (const ifd of tiff.ifds) {
    if (ventanaLevelOf(ifd.description) !== undefined) layout.levels.push(ifd);
    else if (isVentanaMacro(ifd.description)) layout.associated.set('macro', ifd);
    else if (ifd.description === 'Thumbnail') layout.associated.set('thumbnail', ifd);
  }
  return layout;
}

/** Every tiled IFD is a level; the stripped `Label` and `Macro` images are what they say. */
function philipsLayout(tiff: TiffFile): SlideLayout {
  const layout: SlideLayout = { levels: [], associated: new Map() };
  for (const ifd of tiff.ifds) {
    if (ifd.isTiled) layout.levels.push(ifd);
    else if (ifd.description?.startsWith('Label')) layout.associated.set('label', ifd);
    else if (ifd.description?.startsWith('Macro')) layout.associated.set('macro', ifd);
  }
  return layout;
}

function leicaOf(tiff: TiffFile): LeicaSlide {
  return parseLeicaXml(tiff.ifds[0]?.description ?? '');
}

function philipsOf(tiff: TiffFile): PhilipsSlide {
  return parsePhilipsXml(tiff.ifds[0]?.description ?? '');
}

/** The iScan metadata: the macro's XMP in a scanner's file, level 0's EncodeInfo in our copy. */
function iScanOf(tiff: TiffFile, base: TiffIfd) {
  for (const ifd of [...tiff.ifds, base]) {
    const element = iScanElement(xmpText(ifd.entries.get(Tag.XMP)?.raw));
    if (element !== undefined) return parseIScan(element);
  }
  return undefined;
}

/**
 * The true size of each level: BIF levels are the stitched camera tiles, Philips levels are
 * padded to whole tiles in the file and clipped back to level 0 over the downsample.
 */
function levelSizes(
  tiff: TiffFile,
  vendor: SlideVendor,
  levels: TiffIfd[],
): Array<{ width: number; height: number }> {
  const stored = levels.map((ifd) => ({ width: ifd.width, height: ifd.height }));
  const base = levels[0]!;
  if (vendor === 'philips') {
    const { downsamples } = philipsOf(tiff);
    if (downsamples.length !== levels.length) {
      throw new ComputeError(
        'MalformedTiff',
        `the Philips XML lists ${downsamples.length} levels; the file has ${levels.length}`,
      );
    }
    return downsamples.map((d) => ({
      width: Math.floor(base.width / d),
      height: Math.floor(base.height / d),
    }));
  }
  if (vendor === 'ventana') {
    const geometry = parseEncodeInfo(
      xmpText(base.entries.get(Tag.XMP)?.raw),
      base.tileWidth,
      base.tileHeight,
    );
    if (geometry === undefined) return stored;
    const magnification0 = ventanaLevelOf(base.description)!.magnification;
    return levels.map((ifd) =>
      stitchedLevelSize(geometry, magnification0 / ventanaLevelOf(ifd.description)!.magnification),
    );
  }
  return stored;
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

function levelOf(
  ifd: TiffIfd,
  index: number,
  sizes: ReadonlyArray<{ width: number; height: number }>,
): SlideLevel {
  const base = sizes[0]!;
  const { width, height } = sizes[index]!;
  return {
    index,
    ifd: ifd.path,
    widthPx: width,
    heightPx: height,
    tileWidth: ifd.tileWidth,
    tileHeight: ifd.tileHeight,
    compression: ifd.compression,
    downsample: (base.width / width + base.height / height) / 2,
  };
}

/**
 * The vendor's own scale first (SVS MPP, OME PhysicalSize, the SCN view over its pixels, BIF
 * ScanRes, Philips DICOM_PIXEL_SPACING), else the TIFF resolution tags.
 */
function calibrate(tiff: TiffFile, base: TiffIfd, vendor: SlideVendor): Mpp | null {
  const own: Partial<Record<SlideVendor, () => Mpp | null>> = {
    aperio: () => aperioMpp(base),
    ome: () => omeMpp(base),
    leica: () => {
      const { x, y } = leicaMpp(leicaOf(tiff));
      return mppOf(x, y);
    },
    ventana: () => {
      const scanRes = iScanOf(tiff, base)?.scanRes ?? null;
      return mppOf(scanRes, scanRes);
    },
    philips: () => {
      const { x, y } = philipsOf(tiff).mpp;
      return mppOf(x, y);
    },
  };
  return own[vendor]?.() ?? tiffMpp(base);
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

function metadataOf(tiff: TiffFile, base: TiffIfd, vendor: SlideVendor): Record<string, string> {
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
  if (vendor === 'leica') {
    const slide = leicaOf(tiff);
    put('leica.objective', slide.main.objective);
    put('openslide.objective-power', integerText(slide.main.objective));
    for (const [key, value] of Object.entries(leicaBounds(slide))) put(`openslide.bounds-${key}`, value);
  }
  if (vendor === 'ventana') {
    const iScan = iScanOf(tiff, base);
    put('ventana.ScanRes', iScan?.scanRes);
    put('ventana.Magnification', iScan?.magnification);
    put('openslide.objective-power', iScan?.magnification);
  }
  if (vendor === 'philips')
    put('philips.DICOM_PIXEL_SPACING', `${philipsOf(tiff).mpp.y / 1000} ${philipsOf(tiff).mpp.x / 1000}`);
  return metadata;
}

/** An objective such as `20` as OpenSlide copies it to `openslide.objective-power`: integers only. */
function integerText(text: string | undefined): string | undefined {
  return text !== undefined && /^\d+$/.test(text) ? text : undefined;
}
