import { ComputeError } from '../errors';
import {
  attr,
  childElements,
  formatXml,
  localName,
  parseXml,
  scrubXml,
  textOf,
  type XmlElement,
  type XmlRule,
} from './xml';

/**
 * Philips DP TIFF (IntelliSite export): the first ImageDescription is a `DPUfsImport` data
 * object whose attributes carry DICOM names. The whole-slide image (`PIM_DP_IMAGE_TYPE` WSI)
 * gives the pixel spacing in millimetres, `"row" "column"`, and one pixel-data representation
 * per pyramid level; the TIFF levels are padded to whole tiles, so their true sizes come from
 * the spacings, as OpenSlide's philips driver computes them.
 */
export function isPhilipsXml(description: string | undefined): description is string {
  return description !== undefined && /<DataObject\s+ObjectType\s*=\s*"DPUfsImport"/.test(description);
}

export interface PhilipsSlide {
  /** µm per pixel of level 0. */
  mpp: { x: number; y: number };
  /** Level 0 size over each level's, one per representation, level 0 first (1). */
  downsamples: number[];
}

function attributeNamed(object: XmlElement, name: string): XmlElement | undefined {
  return childElements(object, 'Attribute').find((element) => attr(element, 'Name') === name);
}

function arrayOf(attribute: XmlElement | undefined): XmlElement[] {
  const array = attribute && childElements(attribute, 'Array')[0];
  return array === undefined ? [] : childElements(array, 'DataObject');
}

function imageType(object: XmlElement): string | undefined {
  const type = attributeNamed(object, 'PIM_DP_IMAGE_TYPE');
  return type && textOf(type).trim();
}

/** `"0.000499" "0.000499"` (row spacing, then column spacing, in mm) as µm per pixel. */
function spacingOf(attribute: XmlElement | undefined): { x: number; y: number } | undefined {
  const values =
    attribute === undefined ? [] : textOf(attribute).replaceAll('"', ' ').trim().split(/\s+/).map(Number);
  const [row, column] = values;
  if (values.length !== 2 || !(row! > 0) || !(column! > 0)) return undefined;
  return { x: column! * 1000, y: row! * 1000 };
}

export function parsePhilipsXml(xml: string): PhilipsSlide {
  const root = parseXml(xml);
  const images = root === undefined ? [] : arrayOf(attributeNamed(root, 'PIM_DP_SCANNED_IMAGES'));
  const wsi = images.find((image) => imageType(image) === 'WSI');
  if (wsi === undefined) throw new ComputeError('MalformedTiff', 'the Philips XML has no WSI image');
  const mpp = spacingOf(attributeNamed(wsi, 'DICOM_PIXEL_SPACING'));
  const spacings = arrayOf(attributeNamed(wsi, 'PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE')).map(
    (representation) => spacingOf(attributeNamed(representation, 'DICOM_PIXEL_SPACING')),
  );
  const base = spacings[0];
  if (mpp === undefined || base === undefined || spacings.some((spacing) => spacing === undefined)) {
    throw new ComputeError('MalformedTiff', 'the Philips XML has no usable DICOM_PIXEL_SPACING');
  }
  // Integer downsamples, as OpenSlide assumes: the spacings are rounded decimals.
  const downsamples = spacings.map((spacing) => Math.round((spacing!.x / base.x + spacing!.y / base.y) / 2));
  return { mpp, downsamples };
}

/** Attributes that describe the pixels and the scanner model, not the patient, slide or site. */
const philipsSafeAttributes: ReadonlySet<string> = new Set([
  'PIM_DP_SCANNED_IMAGES',
  'PIM_DP_IMAGE_TYPE',
  'PIM_DP_IMAGE_COLUMNS',
  'PIM_DP_IMAGE_ROWS',
  'PIM_DP_UFS_INTERFACE_VERSION',
  'DICOM_PIXEL_SPACING',
  'DICOM_MANUFACTURER',
  'DICOM_MANUFACTURERS_MODEL_NAME',
  'DICOM_SOFTWARE_VERSIONS',
  'DICOM_LOSSY_IMAGE_COMPRESSION',
  'DICOM_LOSSY_IMAGE_COMPRESSION_METHOD',
  'DICOM_LOSSY_IMAGE_COMPRESSION_RATIO',
  'DICOM_BITS_ALLOCATED',
  'DICOM_BITS_STORED',
  'DICOM_HIGH_BIT',
  'DICOM_PIXEL_REPRESENTATION',
  'DICOM_PHOTOMETRIC_INTERPRETATION',
  'DICOM_SAMPLES_PER_PIXEL',
  'DICOM_PLANAR_CONFIGURATION',
  'PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE',
  'PIIM_PIXEL_DATA_REPRESENTATION_NUMBER',
  'PIIM_PIXEL_DATA_REPRESENTATION_COLUMNS',
  'PIIM_PIXEL_DATA_REPRESENTATION_ROWS',
  'PIIM_DP_PIXEL_DATA_REPRESENTATION_POSITION',
]);

const philipsRules: Record<string, XmlRule> = {
  DataObject: { attributes: ['ObjectType'] },
  Attribute: { attributes: ['Name', 'Group', 'Element', 'PMSVR'], text: true },
  Array: { attributes: [] },
};

/**
 * The Philips XML of a de-identified copy: the barcode, dates, serial number, source file name
 * and every attribute not known harmless go (an allowlist); so do the label and macro image
 * objects, which name (and in real files embed, base64) the images dropped with them.
 */
export function scrubPhilipsXml(xml: string): { text: string; removed: string[] } {
  const root = parseXml(xml);
  if (root === undefined) throw new ComputeError('MalformedTiff', 'the Philips XML does not parse');
  const removed = new Set<string>();
  const ruleOf = (element: XmlElement): XmlRule | undefined => {
    const name = localName(element);
    if (name === 'Attribute') {
      const attribute = attr(element, 'Name') ?? '';
      if (!philipsSafeAttributes.has(attribute)) {
        removed.add(`philips.${attribute}`);
        return undefined;
      }
    }
    if (name === 'DataObject' && attr(element, 'ObjectType') === 'DPScannedImage') {
      const type = imageType(element);
      if (type !== 'WSI') {
        removed.add(`philips.${type ?? 'DPScannedImage'}`);
        return undefined;
      }
    }
    return philipsRules[name];
  };
  const kept = scrubXml(root, ruleOf, 'philips', removed);
  if (kept === undefined) throw new ComputeError('MalformedTiff', 'the Philips XML has no data object');
  return {
    text: formatXml(kept),
    removed: [...removed].filter((what) => what !== 'philips.Attribute' && what !== 'philips.DataObject'),
  };
}
