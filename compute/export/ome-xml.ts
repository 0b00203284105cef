/** The OME-XML (2016-06 schema) that describes an OME-TIFF: images, channels, IFD mapping. */

export const OME_NAMESPACE = 'http://www.openmicroscopy.org/Schemas/OME/2016-06';

/** OME pixel types by our element types. */
export type OmePixelType = 'uint8' | 'uint16' | 'uint32' | 'float32';

const omeType: Record<OmePixelType, string> = {
  uint8: 'uint8',
  uint16: 'uint16',
  uint32: 'uint32',
  float32: 'float',
};

export interface OmeXmlChannel {
  name: string;
  /** OME colour: RGBA packed into a signed 32-bit integer (`omeColor`). */
  color?: number;
}

export interface OmeXmlImage {
  name: string;
  pixelType: OmePixelType;
  width: number;
  height: number;
  /** One RGB plane (3 samples per pixel, interleaved) instead of one plane per channel. */
  rgb: boolean;
  channels: readonly OmeXmlChannel[];
  /** Microns per pixel of the full resolution; `null` leaves the physical size out. */
  physicalSizeUm: { x: number; y: number } | null;
  /** The main-chain IFD of each plane, by plane (channel) index. */
  firstIfd: number;
}

/** `RRGGBB` hex to OME's signed RGBA integer, opaque. */
export function omeColor(hex: string): number {
  if (!/^[0-9a-fA-F]{6}$/.test(hex)) throw new RangeError(`colour ${hex} is not RRGGBB`);
  return (Number.parseInt(hex, 16) * 256 + 255) | 0;
}

export function omeXml(images: readonly OmeXmlImage[], creator: string): string {
  const body = images.map((image, i) => imageXml(image, i)).join('');
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<OME xmlns="${OME_NAMESPACE}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"` +
    ` xsi:schemaLocation="${OME_NAMESPACE} ${OME_NAMESPACE}/ome.xsd" Creator="${escapeXml(creator)}">` +
    `${body}</OME>`
  );
}

function imageXml(image: OmeXmlImage, index: number): string {
  const planes = image.rgb ? 1 : image.channels.length;
  const sizeC = image.rgb ? 3 : image.channels.length;
  const physical = image.physicalSizeUm
    ? ` PhysicalSizeX="${image.physicalSizeUm.x}" PhysicalSizeXUnit="µm"` +
      ` PhysicalSizeY="${image.physicalSizeUm.y}" PhysicalSizeYUnit="µm"`
    : '';
  const channels = image.channels
    .map((channel, c) => {
      const color = channel.color === undefined ? '' : ` Color="${channel.color}"`;
      return (
        `<Channel ID="Channel:${index}:${c}" Name="${escapeXml(channel.name)}"` +
        ` SamplesPerPixel="${image.rgb ? 3 : 1}"${color}/>`
      );
    })
    .join('');
  let tiffData = '';
  for (let p = 0; p < planes; p++) {
    tiffData += `<TiffData IFD="${image.firstIfd + p}" FirstC="${p}" FirstZ="0" FirstT="0" PlaneCount="1"/>`;
  }
  return (
    `<Image ID="Image:${index}" Name="${escapeXml(image.name)}">` +
    `<Pixels ID="Pixels:${index}" DimensionOrder="XYCZT" Type="${omeType[image.pixelType]}"` +
    ` SizeX="${image.width}" SizeY="${image.height}" SizeC="${sizeC}" SizeZ="1" SizeT="1"` +
    ` BigEndian="false" Interleaved="${image.rgb}"${physical}>` +
    `${channels}${tiffData}</Pixels></Image>`
  );
}

function escapeXml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}
