import { ComputeError } from '../errors';
import { effectiveMppOf, type Mpp, mppOf } from '../slide/calibration';
import type { ByteSource } from '../source';
import type { DicomDataset } from './dataset';
import { type DicomFile, type ParseDicomOptions, parseDicom } from './parse';
import { frameCountOf } from './pixels';
import { type FrameCodec, Tag, WholeSlideMicroscopyStorage } from './tags';

export interface DicomLevel {
  index: number;
  widthPx: number;
  heightPx: number;
  /** Frame size: DICOM tiles are frames. */
  tileWidth: number;
  tileHeight: number;
  frames: number;
  codec: FrameCodec;
  downsample: number;
}

/**
 * Shaped like the TIFF `SlideProbe` where the two agree; `vendor: 'dicom'` tells them apart.
 * One instance is one level: the service builds its own pyramid from level 0.
 */
export interface DicomProbe {
  vendor: 'dicom';
  widthPx: number;
  heightPx: number;
  levels: DicomLevel[];
  /** From PixelSpacing (mm), per axis; null when absent or implausible. */
  mpp: Mpp | null;
  effectiveMpp: number | null;
  metadata: Record<string, string>;
  transferSyntax: string;
  /** ImageType values: `DERIVED\PRIMARY\VOLUME\NONE` for a level-0 file. */
  imageType: string[];
  photometric: string;
  samplesPerPixel: 1 | 3;
  organization: 'TILED_FULL' | 'TILED_SPARSE';
}

/** What readers need beyond the probe: how frames tile the image. */
export interface WsiGeometry {
  probe: DicomProbe;
  frameWidth: number;
  frameHeight: number;
  frames: number;
  tilesAcross: number;
  tilesDown: number;
  /** Planar configuration of native pixel data: 1 stores each colour as its own plane. */
  planar: boolean;
}

/** Beyond these a level is a decompression bomb, not a slide (the brief's ingest limits). */
const limits = { side: 200_000, pixels: 1e10, framePixels: 16384 * 16384 };

const colourPhotometrics = new Set(['RGB', 'YBR_FULL_422', 'YBR_FULL', 'YBR_ICT', 'YBR_RCT']);
const greyPhotometrics = new Set(['MONOCHROME2', 'MONOCHROME1']);

/** Probes a DICOM WSI instance: refuses anything the service cannot ingest as level 0 of a slide. */
export async function probeDicom(source: ByteSource, options: ParseDicomOptions = {}): Promise<DicomProbe> {
  return describeWsi(await parseDicom(source, options)).probe;
}

export function describeWsi(file: DicomFile): WsiGeometry {
  const { dataset } = file;
  checkSopClass(file);
  const imageType = checkImageType(dataset);
  const widthPx = requiredSize(dataset, Tag.TotalPixelMatrixColumns, 'TotalPixelMatrixColumns');
  const heightPx = requiredSize(dataset, Tag.TotalPixelMatrixRows, 'TotalPixelMatrixRows');
  const frameWidth = requiredSize(dataset, Tag.Columns, 'Columns');
  const frameHeight = requiredSize(dataset, Tag.Rows, 'Rows');
  checkLimits(widthPx, heightPx, frameWidth, frameHeight);
  const { samplesPerPixel, photometric } = checkPixelFormat(dataset);
  checkSinglePlane(dataset);
  const frames = checkPixelData(file, frameWidth * frameHeight * samplesPerPixel);
  const tilesAcross = Math.ceil(widthPx / frameWidth);
  const tilesDown = Math.ceil(heightPx / frameHeight);
  const organization = organizationOf(dataset, frames, tilesAcross * tilesDown);
  const mpp = mppFrom(dataset);
  const probe: DicomProbe = {
    vendor: 'dicom',
    widthPx,
    heightPx,
    levels: [
      {
        index: 0,
        widthPx,
        heightPx,
        tileWidth: frameWidth,
        tileHeight: frameHeight,
        frames,
        codec: file.codec,
        downsample: 1,
      },
    ],
    mpp,
    effectiveMpp: effectiveMppOf(mpp),
    metadata: metadataOf(file),
    transferSyntax: file.transferSyntax,
    imageType,
    photometric,
    samplesPerPixel,
    organization,
  };
  const planar = file.codec === 'none' && dataset.number(Tag.PlanarConfiguration) === 1;
  return { probe, frameWidth, frameHeight, frames, tilesAcross, tilesDown, planar };
}

function unsupported(message: string): ComputeError {
  return new ComputeError('UnsupportedDicom', message);
}

function malformed(message: string): ComputeError {
  return new ComputeError('MalformedDicom', message);
}

function checkSopClass({ dataset, meta }: DicomFile): void {
  const sopClass = dataset.string(Tag.SopClassUid) ?? meta.string(Tag.MediaStorageSopClassUid);
  if (sopClass !== WholeSlideMicroscopyStorage) {
    throw unsupported(
      `SOP class ${sopClass ?? '(none)'} is not VL Whole Slide Microscopy Image Storage (${WholeSlideMicroscopyStorage})`,
    );
  }
}

/** Only the VOLUME image is tissue; labels and overviews show the slide label, often a name. */
function checkImageType(dataset: DicomDataset): string[] {
  const imageType = dataset.strings(Tag.ImageType) ?? [];
  const flavor = imageType[2];
  if (flavor === undefined)
    throw malformed('ImageType has no third value (VOLUME, LABEL, OVERVIEW, THUMBNAIL)');
  if (flavor !== 'VOLUME') {
    throw unsupported(
      `this instance is a ${flavor} image, not a VOLUME: upload the level-0 VOLUME instance of the slide`,
    );
  }
  return imageType;
}

function requiredSize(dataset: DicomDataset, tag: number, name: string): number {
  const value = dataset.number(tag);
  if (value === undefined || !Number.isSafeInteger(value) || value < 1) {
    throw malformed(`${name} is ${value === undefined ? 'missing' : `not a size (${value})`}`);
  }
  return value;
}

function checkLimits(width: number, height: number, frameWidth: number, frameHeight: number): void {
  if (width > limits.side || height > limits.side || width * height > limits.pixels) {
    throw new ComputeError('TooLarge', `a ${width} x ${height} image is beyond what the service ingests`);
  }
  if (frameWidth * frameHeight > limits.framePixels) {
    throw new ComputeError(
      'TooLarge',
      `${frameWidth} x ${frameHeight} frames are beyond what the service decodes`,
    );
  }
}

function checkPixelFormat(dataset: DicomDataset): { samplesPerPixel: 1 | 3; photometric: string } {
  const samplesPerPixel = dataset.number(Tag.SamplesPerPixel);
  const photometric = dataset.string(Tag.PhotometricInterpretation) ?? '';
  const known = samplesPerPixel === 3 ? colourPhotometrics : greyPhotometrics;
  if ((samplesPerPixel !== 1 && samplesPerPixel !== 3) || !known.has(photometric)) {
    throw unsupported(
      `${samplesPerPixel} samples per pixel with photometric interpretation ${photometric || '(none)'}`,
    );
  }
  const bits = dataset.number(Tag.BitsAllocated);
  if (bits !== 8) throw unsupported(`${bits ?? 'no'} bits allocated per sample; only 8 is read`);
  return { samplesPerPixel, photometric };
}

/** Fluorescence channels and z-stacks are frames of other planes: not an RGB brightfield level. */
function checkSinglePlane(dataset: DicomDataset): void {
  const paths = dataset.number(Tag.NumberOfOpticalPaths) ?? 1;
  const planes = dataset.number(Tag.TotalPixelMatrixFocalPlanes) ?? 1;
  if (paths > 1 || planes > 1) {
    throw unsupported(`${paths} optical paths and ${planes} focal planes: only a single-plane image is read`);
  }
}

/** The frame count, checked against the pixel data that must hold it. */
function checkPixelData(file: DicomFile, bytesPerFrame: number): number {
  const pixels = file.pixelData;
  if (pixels === undefined) throw malformed('the instance has no pixel data');
  if (pixels.kind === 'encapsulated') return pixels.frames.length;
  return frameCountOf(file.dataset, bytesPerFrame, pixels.element.length);
}

/**
 * TILED_FULL frames fill the grid row by row. TILED_SPARSE frames say where they go in the
 * per-frame functional groups (read when the slide is opened). A file that says neither and
 * has no per-frame groups is taken as full when its frames fill the grid, as older writers did.
 */
function organizationOf(dataset: DicomDataset, frames: number, tiles: number): DicomProbe['organization'] {
  const declared = dataset.string(Tag.DimensionOrganizationType);
  const hasPerFrame = dataset.get(Tag.PerFrameFunctionalGroupsSequence) !== undefined;
  const organization =
    declared === 'TILED_FULL' || (declared === undefined && !hasPerFrame) ? 'TILED_FULL' : 'TILED_SPARSE';
  if (organization === 'TILED_SPARSE' && !hasPerFrame) {
    throw malformed(
      `DimensionOrganizationType ${declared} without per-frame functional groups to place frames`,
    );
  }
  if (organization === 'TILED_FULL' && frames < tiles) {
    throw malformed(`${frames} frames cannot fill a grid of ${tiles} tiles`);
  }
  return organization;
}

/** PixelSpacing is row spacing (y) then column spacing (x), in millimetres. */
function mppFrom(dataset: DicomDataset): Mpp | null {
  const measures = dataset.items(Tag.SharedFunctionalGroupsSequence)[0]?.items(Tag.PixelMeasuresSequence)[0];
  const spacing = measures?.numbers(Tag.PixelSpacing);
  const [rowMm, columnMm] = spacing ?? [];
  if (rowMm === undefined || columnMm === undefined) return null;
  return mppOf(columnMm * 1000, rowMm * 1000);
}

function metadataOf(file: DicomFile): Record<string, string> {
  const { dataset } = file;
  const metadata: Record<string, string> = { 'dicom.TransferSyntaxUID': file.transferSyntax };
  const put = (key: string, values: string[] | undefined) => {
    if (values !== undefined && values.length > 0) metadata[`dicom.${key}`] = values.join('\\');
  };
  put('ImageType', dataset.strings(Tag.ImageType));
  put('Manufacturer', dataset.strings(Tag.Manufacturer));
  put('ManufacturerModelName', dataset.strings(Tag.ManufacturerModelName));
  put('SoftwareVersions', dataset.strings(Tag.SoftwareVersions));
  put('PhotometricInterpretation', dataset.strings(Tag.PhotometricInterpretation));
  put('DimensionOrganizationType', dataset.strings(Tag.DimensionOrganizationType));
  const measures = dataset.items(Tag.SharedFunctionalGroupsSequence)[0]?.items(Tag.PixelMeasuresSequence)[0];
  put('PixelSpacing', measures?.strings(Tag.PixelSpacing));
  put('ObjectiveLensPower', dataset.items(Tag.OpticalPathSequence)[0]?.strings(Tag.ObjectiveLensPower));
  return metadata;
}
