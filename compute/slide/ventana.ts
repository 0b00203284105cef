import { ComputeError } from '../errors';
import type { ImageLevel, Region, RgbImage, SlideImage } from '../image';
import {
  attr,
  childElements,
  find,
  findAll,
  formatXml,
  localName,
  parseXml,
  scrubXml,
  type XmlElement,
  type XmlRule,
} from './xml';

/**
 * Ventana / Roche BIF (iScan): levels are named by their ImageDescription
 * (`level=0 mag=20 quality=90`); the scanner's metadata is the `iScan` XMP packet (ScanRes is
 * µm per pixel, Magnification the objective). Level 0 holds the camera tiles as scanned, which
 * overlap their neighbours; its `EncodeInfo` XMP says by how much (`TileJointInfo`). Lower
 * levels are downsamples of that raw mosaic, so each of their TIFF tiles holds several camera
 * tiles. Stitched as OpenSlide's ventana driver stitches: one confidence-weighted mean advance
 * per axis, and where tiles overlap the one below and to the right is on top.
 */
export function ventanaLevelOf(
  description: string | undefined,
): { level: number; magnification: number } | undefined {
  const match = description?.match(/^level=(\d+) mag=([\d.]+)\b/);
  if (match === undefined || match === null) return undefined;
  return { level: Number(match[1]), magnification: Number(match[2]) };
}

export function isVentanaMacro(description: string | undefined): boolean {
  return description === 'Label Image' || description === 'Label_Image';
}

const decoder = new TextDecoder();

/** The XMP packet's text; undefined when the IFD has none. */
export function xmpText(raw: Uint8Array | undefined): string | undefined {
  return raw === undefined ? undefined : decoder.decode(raw).replace(/\0+$/, '');
}

export interface IScan {
  /** µm per pixel at level 0. */
  scanRes: number | undefined;
  magnification: number | undefined;
}

/** The `iScan` element of an XMP packet (the macro's, or the copy inside level 0's EncodeInfo). */
export function iScanElement(xmp: string | undefined): XmlElement | undefined {
  const root = xmp === undefined ? undefined : parseXml(xmp);
  return root === undefined ? undefined : findAll(root, 'iScan')[0];
}

export function parseIScan(element: XmlElement): IScan {
  const number = (name: string) => {
    const value = Number(attr(element, name));
    return Number.isFinite(value) && value > 0 ? value : undefined;
  };
  return { scanRes: number('ScanRes'), magnification: number('Magnification') };
}

/** One scanned area: a grid of camera tiles placed on level 0. */
interface Area {
  startCol: number;
  startRow: number;
  cols: number;
  rows: number;
  /** Level-0 position of the area's first tile. */
  x: number;
  y: number;
}

export interface BifGeometry {
  /** The camera tile size: the TIFF tile size of level 0. */
  tileWidth: number;
  tileHeight: number;
  /** Distance between neighbouring camera tiles on level 0. */
  advanceX: number;
  advanceY: number;
  areas: Area[];
}

function number(element: XmlElement, name: string): number {
  const value = Number(attr(element, name));
  if (!Number.isFinite(value)) {
    throw new ComputeError('MalformedTiff', `BIF EncodeInfo: <${element.name}> has no number ${name}`);
  }
  return value;
}

/**
 * The camera-tile layout of level 0 from its `EncodeInfo` XMP; undefined for a Ventana TIFF
 * without one (a plain tiled pyramid).
 */
export function parseEncodeInfo(
  xmp: string | undefined,
  tileWidth: number,
  tileHeight: number,
): BifGeometry | undefined {
  const root = xmp === undefined ? undefined : parseXml(xmp);
  if (root === undefined || localName(root) !== 'EncodeInfo') return undefined;
  const infos = findAll(root, 'ImageInfo');
  const origins = childElements(find(root, 'AoiOrigin') ?? root).filter((element) =>
    /^AOI\d+$/.test(element.name),
  );
  if (infos.length === 0 || infos.length !== origins.length) {
    throw new ComputeError('MalformedTiff', 'BIF EncodeInfo: missing or inconsistent region metadata');
  }
  const overlap = { x: 0, y: 0, weightX: 0, weightY: 0 };
  const areas: Area[] = [];
  infos.forEach((info, i) => {
    if (number(info, 'AOIScanned') === 0) return;
    if (number(info, 'Width') !== tileWidth || number(info, 'Height') !== tileHeight) {
      throw new ComputeError(
        'MalformedTiff',
        'BIF EncodeInfo: the camera tile size is not the TIFF tile size',
      );
    }
    const origin = origins[i]!;
    areas.push({
      startCol: Math.floor(number(origin, 'OriginX') / tileWidth),
      startRow: Math.floor(number(origin, 'OriginY') / tileHeight),
      cols: number(info, 'NumCols'),
      rows: number(info, 'NumRows'),
      x: number(info, 'Pos-X'),
      y: number(info, 'Pos-Y'),
    });
    for (const joint of childElements(info, 'TileJointInfo')) {
      const confidence = number(joint, 'Confidence');
      if (attr(joint, 'Direction') === 'UP') {
        overlap.y += confidence * number(joint, 'OverlapY');
        overlap.weightY += confidence;
      } else {
        overlap.x += confidence * number(joint, 'OverlapX');
        overlap.weightX += confidence;
      }
    }
  });
  if (areas.length === 0) throw new ComputeError('MalformedTiff', 'BIF EncodeInfo: no scanned area');
  const geometry = {
    tileWidth,
    tileHeight,
    advanceX: tileWidth - (overlap.weightX > 0 ? overlap.x / overlap.weightX : 0),
    advanceY: tileHeight - (overlap.weightY > 0 ? overlap.y / overlap.weightY : 0),
    areas,
  };
  // Pos-Y is the distance from the area's bottom to a line below every area.
  const heightOf = (area: Area) => (area.rows - 1) * geometry.advanceY + tileHeight;
  const top = Math.max(...areas.map((area) => area.y + heightOf(area)));
  for (const area of areas) area.y = top - area.y - heightOf(area);
  return geometry;
}

/** One camera tile: where it lies in the TIFF level and where it goes in the stitched level. */
interface CameraTile {
  col: number;
  row: number;
  source: { x: number; y: number };
  x: number;
  y: number;
}

function cameraTiles(geometry: BifGeometry, downsample: number): CameraTile[] {
  const tiles: CameraTile[] = [];
  const size = { w: geometry.tileWidth / downsample, h: geometry.tileHeight / downsample };
  for (const area of geometry.areas) {
    for (let row = area.startRow; row < area.startRow + area.rows; row++) {
      for (let col = area.startCol; col < area.startCol + area.cols; col++) {
        tiles.push({
          col,
          row,
          source: { x: col * size.w, y: row * size.h },
          x: Math.round((area.x + (col - area.startCol) * geometry.advanceX) / downsample),
          y: Math.round((area.y + (row - area.startRow) * geometry.advanceY) / downsample),
        });
      }
    }
  }
  // Painted top-left first: where tiles overlap, the one below and to the right is on top,
  // as in OpenSlide's rendering.
  return tiles.sort((a, b) => a.row - b.row || a.col - b.col);
}

/** The stitched size of a level: large enough for every camera tile, as OpenSlide sizes it. */
export function stitchedLevelSize(
  geometry: BifGeometry,
  downsample: number,
): { width: number; height: number } {
  let width = 0;
  let height = 0;
  for (const area of geometry.areas) {
    width = Math.max(width, (area.x + (area.cols - 1) * geometry.advanceX + geometry.tileWidth) / downsample);
    height = Math.max(
      height,
      (area.y + (area.rows - 1) * geometry.advanceY + geometry.tileHeight) / downsample,
    );
  }
  return { width: Math.ceil(width), height: Math.ceil(height) };
}

/**
 * The stitched slide over `raw`, the TIFF levels read as they are stored (the raw mosaic).
 * Camera tiles of a level with downsample d are d times smaller and must be whole pixels;
 * positions are rounded to the pixel (OpenSlide draws fractional ones resampled). Glass that no
 * camera tile covers is white.
 */
export function stitchedSlide(
  raw: SlideImage,
  geometry: BifGeometry,
  levels: readonly ImageLevel[],
): SlideImage {
  const placed = levels.map((level, index) => {
    const downsample = Math.round(level.downsample);
    const w = geometry.tileWidth / downsample;
    const h = geometry.tileHeight / downsample;
    if (!Number.isInteger(w) || !Number.isInteger(h)) {
      throw new ComputeError(
        'UnsupportedTiff',
        `BIF level ${index}: camera tiles of ${w} x ${h} pixels are not whole`,
      );
    }
    return { tiles: cameraTiles(geometry, downsample), w, h };
  });
  const base = levels[0]!;
  return {
    widthPx: base.widthPx,
    heightPx: base.heightPx,
    levels,
    async readRegion(region: Region, signal?: AbortSignal): Promise<RgbImage> {
      const level = levels[region.level];
      const layout = placed[region.level];
      const { x, y, width, height } = region;
      if (
        level === undefined ||
        layout === undefined ||
        x < 0 ||
        y < 0 ||
        x + width > level.widthPx ||
        y + height > level.heightPx
      ) {
        throw new RangeError(
          `region ${width} x ${height} at (${x}, ${y}) is not inside level ${region.level}`,
        );
      }
      const out = new Uint8Array(width * height * 3).fill(255);
      const rawLevel = raw.levels[region.level]!;
      const parts = layout.tiles.flatMap((tile) => {
        const x0 = Math.max(x, tile.x);
        const y0 = Math.max(y, tile.y);
        const sx = tile.source.x + x0 - tile.x;
        const sy = tile.source.y + y0 - tile.y;
        const w = Math.min(x + width, tile.x + layout.w) - x0;
        const h = Math.min(y + height, tile.y + layout.h) - y0;
        if (w <= 0 || h <= 0 || sx >= rawLevel.widthPx || sy >= rawLevel.heightPx) return [];
        const source = {
          level: region.level,
          x: sx,
          y: sy,
          width: Math.min(w, rawLevel.widthPx - sx),
          height: Math.min(h, rawLevel.heightPx - sy),
        };
        return [{ x0, y0, source }];
      });
      // Read together, painted in order: the later tile is the one on top of an overlap.
      const images = await Promise.all(parts.map(({ source }) => raw.readRegion(source, signal)));
      for (const [i, { x0, y0 }] of parts.entries()) {
        const part = images[i]!;
        for (let row = 0; row < part.height; row++) {
          const from = row * part.width * 3;
          out.set(part.data.subarray(from, from + part.width * 3), ((y0 - y + row) * width + (x0 - x)) * 3);
        }
      }
      return { data: out, width, height };
    },
  };
}

const ventanaRules = (element: XmlElement): XmlRule | undefined => {
  const name = localName(element);
  if (/^AOI\d+$/.test(name)) {
    return { attributes: ['AOIScanned', 'Left', 'Top', 'Right', 'Bottom', 'OriginX', 'OriginY'] };
  }
  return (
    {
      EncodeInfo: { attributes: ['Ver'] },
      SlideInfo: { attributes: [] },
      iScan: {
        attributes: [
          'Magnification',
          'ScanRes',
          'ScanMode',
          'FocusMode',
          'ZLayers',
          'ZSpacing',
          'ScannerModel',
        ],
      },
      AoiInfo: { attributes: ['XIMAGESIZE', 'YIMAGESIZE', 'NumRows', 'NumCols', 'Pos-X', 'Pos-Y'] },
      SlideStitchInfo: { attributes: [] },
      ImageInfo: {
        attributes: ['AOIScanned', 'AOIIndex', 'Width', 'Height', 'NumRows', 'NumCols', 'Pos-X', 'Pos-Y'],
      },
      TileJointInfo: {
        attributes: ['Confidence', 'Direction', 'FlagJoined', 'OverlapX', 'OverlapY', 'Tile1', 'Tile2'],
      },
      AoiOrigin: { attributes: [] },
    } satisfies Record<string, XmlRule>
  )[name];
};

/**
 * Level 0's XMP for a de-identified copy: the stitching (`EncodeInfo`) and the scale and
 * objective of `iScan`, nothing else (an allowlist: the slide annotation, user name, scanner
 * unit number, dates and calibration image go). The macro's XMP, where iScan usually lives, is
 * dropped with the macro, so its scrubbed iScan is carried into EncodeInfo when that has none.
 */
export function scrubVentanaXmp(
  encodeInfo: string,
  macroXmp: string | undefined,
): { text: string; removed: string[] } {
  const root = parseXml(encodeInfo);
  if (root === undefined) throw new ComputeError('MalformedTiff', 'the BIF EncodeInfo XMP does not parse');
  const removed = new Set<string>();
  const kept = scrubXml(root, ventanaRules, 'ventana', removed);
  if (kept === undefined) throw new ComputeError('MalformedTiff', 'the BIF level-0 XMP is not EncodeInfo');
  const macroIScan = iScanElement(macroXmp);
  if (findAll(kept, 'iScan').length === 0 && macroIScan !== undefined) {
    const iScan = scrubXml(macroIScan, ventanaRules, 'ventana', removed);
    const slideInfo = find(kept, 'SlideInfo');
    if (iScan !== undefined && slideInfo !== undefined) slideInfo.children.unshift(iScan);
    else if (iScan !== undefined)
      kept.children.unshift({ name: 'SlideInfo', attributes: [], children: [iScan] });
  }
  return { text: formatXml(kept), removed: [...removed] };
}

/**
 * The macro's iScan packet, scrubbed as in `scrubVentanaXmp`, for the copy's first IFD: where
 * OpenSlide looks for it to tell a BIF.
 */
export function scrubIScanXmp(macroXmp: string | undefined): { text: string; removed: string[] } | undefined {
  const iScan = iScanElement(macroXmp);
  if (iScan === undefined) return undefined;
  const removed = new Set<string>();
  const kept = scrubXml(iScan, ventanaRules, 'ventana', removed);
  return kept === undefined ? undefined : { text: formatXml(kept), removed: [...removed] };
}
