import { formatAperioDescription, isAperioDescription, isOmeXml, parseAperioDescription } from '../slide';
import { isPhilipsXml, scrubPhilipsXml } from '../slide/philips';
import { ventanaLevelOf } from '../slide/ventana';

/**
 * Aperio keys that describe the scan, not the patient, the operator or the site. An allowlist:
 * a key a newer scanner adds is dropped until someone decides it is harmless.
 */
const aperioSafeKeys: ReadonlySet<string> = new Set([
  'AppMag',
  'MPP',
  'StripeWidth',
  'OriginalWidth',
  'OriginalHeight',
  'Originalheight',
  'Filtered',
  'Exposure Time',
  'Exposure Scale',
  'Gamma',
  'DisplayColor',
  'ICC Profile',
  'Focus Offset',
  'LineCameraSkew',
  'LineAreaXOffset',
  'LineAreaYOffset',
  'Left',
  'Top',
]);

/** OME elements that name people, dates or free text; removed whole. */
const omeDroppedElements = [
  'AcquisitionDate',
  'Experimenter',
  'ExperimenterGroup',
  'ExperimenterRef',
  'ExperimenterGroupRef',
  'Description',
  'StructuredAnnotations',
  'Instrument',
  'InstrumentRef',
];

/** OME attributes that carry file names, serial numbers or free names. */
const omeDroppedAttributes = ['FileName', 'SerialNumber', 'LotNumber', 'Name'];

export interface ScrubbedDescription {
  /** The text to write, or undefined to drop the tag. */
  text: string | undefined;
  /** What was removed: Aperio keys, OME elements and attributes, or the whole description. */
  removed: string[];
}

export interface ScrubOptions {
  /** New index of each kept main-chain IFD, by old index: OME's TiffData IFD references follow it. */
  ifdRenumbering: ReadonlyMap<number, number>;
}

/** Keeps what readers need to recognise the file and its scale; drops everything else. */
export function scrubDescription(description: string, options: ScrubOptions): ScrubbedDescription {
  if (isAperioDescription(description)) return scrubAperio(description);
  if (isOmeXml(description)) return scrubOme(description, options.ifdRenumbering);
  if (isPhilipsXml(description)) return scrubPhilipsXml(description);
  const bifLevel = ventanaLevelOf(description);
  if (bifLevel !== undefined) {
    // BIF names its levels in the description (`level=0 mag=20 quality=90`); nothing else is kept.
    const text = /^level=\d+ mag=[\d.]+ quality=\d+$/.test(description)
      ? description
      : `level=${bifLevel.level} mag=${bifLevel.magnification}`;
    return { text, removed: text === description ? [] : ['ventana.ImageDescription'] };
  }
  if (description === 'Thumbnail') return { text: description, removed: [] };
  // Free text from an unknown writer: nothing says which part is safe.
  return { text: undefined, removed: ['ImageDescription'] };
}

/** The header (the `Aperio Image Library` line and geometry) stays so OpenSlide still says "aperio". */
function scrubAperio(description: string): ScrubbedDescription {
  const parsed = parseAperioDescription(description);
  const kept = parsed.properties.filter(({ key }) => aperioSafeKeys.has(key));
  const removed = parsed.properties
    .filter(({ key }) => !aperioSafeKeys.has(key))
    .map(({ key }) => `aperio.${key}`);
  return { text: formatAperioDescription({ header: parsed.header, properties: kept }), removed };
}

function scrubOme(xml: string, renumbering: ReadonlyMap<number, number>): ScrubbedDescription {
  const removed: string[] = [];
  let text = dropOmeImagesOfDroppedIfds(xml, renumbering, removed);
  for (const name of omeDroppedElements) {
    const element = new RegExp(`<((?:\\w+:)?${name})\\b[^>]*?(?:/>|>[\\s\\S]*?</\\1>)`, 'g');
    const next = text.replace(element, '');
    if (next !== text) removed.push(`ome.${name}`);
    text = next;
  }
  for (const name of omeDroppedAttributes) {
    const attribute = new RegExp(`\\s${name}\\s*=\\s*"[^"]*"`, 'g');
    const next = text.replace(attribute, '');
    if (next !== text) removed.push(`ome.@${name}`);
    text = next;
  }
  // Comments are free text too (Bio-Formats writes a harmless one, others may not).
  text = text.replace(/<!--[\s\S]*?-->/g, '');
  return { text, removed };
}

/**
 * An OME `<Image>` whose planes lived in a dropped IFD (a label, a macro) goes with it, and the
 * `TiffData IFD` numbers of the others follow the IFDs' new places in the main chain.
 */
function dropOmeImagesOfDroppedIfds(
  xml: string,
  renumbering: ReadonlyMap<number, number>,
  removed: string[],
): string {
  const withoutDropped = xml.replace(/<((?:\w+:)?Image)\b[^>]*>[\s\S]*?<\/\1>/g, (image) => {
    const ifd = Number(image.match(/<(?:\w+:)?TiffData\b[^>]*\bIFD\s*=\s*"(\d+)"/)?.[1] ?? 0);
    if (renumbering.has(ifd)) return image;
    removed.push('ome.Image');
    return '';
  });
  return withoutDropped.replace(/(<(?:\w+:)?TiffData\b[^>]*\bIFD\s*=\s*")(\d+)(")/g, (_, head, ifd, tail) => {
    return `${head}${renumbering.get(Number(ifd)) ?? ifd}${tail}`;
  });
}
