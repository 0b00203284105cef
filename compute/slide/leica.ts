import { ComputeError } from '../errors';
import {
  attr,
  childElements,
  find,
  findAll,
  formatXml,
  parseXml,
  scrubXml,
  textOf,
  type XmlElement,
  type XmlRule,
} from './xml';

/**
 * Leica SCN (SCN400 and Versa): a BigTIFF whose first ImageDescription is the SCN XML. The XML
 * lays images on a collection (the whole glass slide, in nanometres): the macro covers the
 * collection at offset 0, the brightfield main image sits where the scanner found tissue. Each
 * image lists its resolutions (`dimension`) and the TIFF directory that holds each one. Read as
 * OpenSlide's leica driver reads it.
 */
export function isLeicaXml(description: string | undefined): description is string {
  return description !== undefined && /<scn\b[^>]*leica-microsystems\.com\/scn\//.test(description);
}

export interface LeicaDimension {
  /** Main-chain TIFF directory. */
  ifd: number;
  width: number;
  height: number;
}

export interface LeicaImage {
  /** Nanometres the image covers on the slide, and where it starts. */
  nm: { across: number; down: number; offsetX: number; offsetY: number };
  /** Resolutions of focal plane 0, largest first. */
  dimensions: LeicaDimension[];
  objective: string | undefined;
}

export interface LeicaSlide {
  collection: { nmAcross: number; nmDown: number };
  main: LeicaImage;
  macro: LeicaImage | undefined;
}

function integer(element: XmlElement, name: string): number {
  const value = Number(attr(element, name));
  if (!Number.isSafeInteger(value)) {
    throw new ComputeError('MalformedTiff', `SCN XML: <${element.name}> has no integer ${name}`);
  }
  return value;
}

function imageOf(element: XmlElement): LeicaImage & { brightfield: boolean } {
  const view = find(element, 'view');
  if (view === undefined) throw new ComputeError('MalformedTiff', 'SCN XML: an image has no view');
  const dimensions = findAll(element, 'dimension')
    .filter((dimension) => (attr(dimension, 'z') ?? '0') === '0' && (attr(dimension, 'c') ?? '0') === '0')
    .map((dimension) => ({
      ifd: integer(dimension, 'ifd'),
      width: integer(dimension, 'sizeX'),
      height: integer(dimension, 'sizeY'),
    }))
    .sort((a, b) => b.width - a.width);
  const settings = find(element, 'scanSettings');
  const source = settings && find(settings, 'illuminationSettings', 'illuminationSource');
  const objective = settings && find(settings, 'objectiveSettings', 'objective');
  return {
    nm: {
      across: integer(view, 'sizeX'),
      down: integer(view, 'sizeY'),
      offsetX: integer(view, 'offsetX'),
      offsetY: integer(view, 'offsetY'),
    },
    dimensions,
    objective: objective && textOf(objective).trim(),
    brightfield: source !== undefined && textOf(source).trim() === 'brightfield',
  };
}

/**
 * The collection, its one brightfield main image and its macro. Fluorescence scans and slides
 * with several main images (OpenSlide composites them onto the collection) are refused by name.
 */
export function parseLeicaXml(xml: string): LeicaSlide {
  const scn = parseXml(xml);
  const collection = scn && find(scn, 'collection');
  if (collection === undefined) throw new ComputeError('MalformedTiff', 'SCN XML has no collection');
  const nmAcross = integer(collection, 'sizeX');
  const nmDown = integer(collection, 'sizeY');
  const images = childElements(collection, 'image').map(imageOf);
  const isMacro = (image: LeicaImage) =>
    image.nm.offsetX === 0 &&
    image.nm.offsetY === 0 &&
    image.nm.across === nmAcross &&
    image.nm.down === nmDown;
  const mains = images.filter((image) => !isMacro(image) && image.brightfield);
  const main = mains[0];
  if (main === undefined || mains.length > 1) {
    throw new ComputeError(
      'UnsupportedTiff',
      main === undefined
        ? 'this Leica SCN has no brightfield main image (fluorescence SCN is not read)'
        : `this Leica SCN holds ${mains.length} brightfield regions; only single-region SCN is read`,
    );
  }
  if (main.dimensions.length === 0)
    throw new ComputeError('MalformedTiff', 'SCN XML: the main image has no dimension');
  return { collection: { nmAcross, nmDown }, main, macro: images.find(isMacro) };
}

/** µm per pixel of the main image's full resolution, per axis. */
export function leicaMpp(slide: LeicaSlide): { x: number; y: number } {
  const base = slide.main.dimensions[0]!;
  return { x: slide.main.nm.across / base.width / 1000, y: slide.main.nm.down / base.height / 1000 };
}

/**
 * Where the main image lies on the slide in level-0 pixels, as OpenSlide's `openslide.bounds-*`
 * give it (OpenSlide's level 0 is the whole collection at the main image's resolution).
 */
export function leicaBounds(slide: LeicaSlide): { x: number; y: number; width: number; height: number } {
  const base = slide.main.dimensions[0]!;
  const nmPerPixel = slide.main.nm.across / base.width;
  return {
    x: Math.trunc(slide.main.nm.offsetX / nmPerPixel),
    y: Math.trunc(slide.main.nm.offsetY / nmPerPixel),
    width: base.width,
    height: base.height,
  };
}

const leicaRules: Record<string, XmlRule> = {
  scn: { attributes: [] },
  collection: { attributes: ['sizeX', 'sizeY'] },
  image: { attributes: [] },
  pixels: { attributes: ['sizeX', 'sizeY'] },
  dimension: { attributes: ['sizeX', 'sizeY', 'r', 'z', 'c', 'ifd'] },
  view: { attributes: ['sizeX', 'sizeY', 'offsetX', 'offsetY', 'spacingZ'] },
  scanSettings: { attributes: [] },
  objectiveSettings: { attributes: [] },
  objective: { attributes: [], text: true },
  illuminationSettings: { attributes: [] },
  numericalAperture: { attributes: [], text: true },
  illuminationSource: { attributes: [], text: true },
};

/**
 * The SCN XML of a de-identified copy: the barcode, names, UUIDs, dates and device go (an
 * allowlist); images whose directories were all dropped (the macro) go; the `ifd` of each kept
 * resolution follows its directory's new place.
 */
export function scrubLeicaXml(
  xml: string,
  ifdRenumbering: ReadonlyMap<number, number>,
): { text: string; removed: string[] } {
  const scn = parseXml(xml);
  if (scn === undefined) throw new ComputeError('MalformedTiff', 'the SCN XML does not parse');
  const removed = new Set<string>();
  const kept = scrubXml(
    scn,
    (element) => leicaRules[element.name.slice(element.name.indexOf(':') + 1)],
    'leica',
    removed,
  );
  const collection = kept && find(kept, 'collection');
  if (collection === undefined) throw new ComputeError('MalformedTiff', 'SCN XML has no collection');
  collection.children = collection.children.filter((node) => {
    if (typeof node === 'string' || node.name.replace(/^.*:/, '') !== 'image') return true;
    const dimensions = findAll(node, 'dimension');
    const keep = dimensions.some((dimension) => ifdRenumbering.has(Number(attr(dimension, 'ifd'))));
    if (!keep) removed.add('leica.image (macro)');
    return keep;
  });
  for (const pixels of findAll(collection, 'pixels')) {
    pixels.children = pixels.children.filter(
      (node) => typeof node === 'string' || ifdRenumbering.has(Number(attr(node, 'ifd'))),
    );
    for (const dimension of childElements(pixels, 'dimension')) {
      const ifd = ifdRenumbering.get(Number(attr(dimension, 'ifd')));
      dimension.attributes = dimension.attributes.map(([key, value]) => [
        key,
        key === 'ifd' ? String(ifd) : value,
      ]);
    }
  }
  return { text: formatXml(kept!, '<?xml version="1.0" encoding="utf-8"?>\n'), removed: [...removed] };
}
