/**
 * Just enough of OME-XML for probing: the first image's Pixels attributes and the image names.
 * A regular-expression reading, not an XML parser: attributes are simple `Name="value"` pairs
 * in every OME writer we know, and nothing here needs the document tree.
 */
export function isOmeXml(description: string | undefined): description is string {
  return description !== undefined && /<OME[\s>]/.test(description);
}

function attributes(tag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const match of tag.matchAll(/([\w:]+)\s*=\s*"([^"]*)"/g)) {
    const [, name, value] = match;
    if (name !== undefined && value !== undefined) out[name] = decodeEntities(value);
  }
  return out;
}

function decodeEntities(text: string): string {
  return text
    .replaceAll('&quot;', '"')
    .replaceAll('&apos;', "'")
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&amp;', '&');
}

/** Attributes of the first `<Pixels>` element (PhysicalSizeX, PhysicalSizeXUnit, SizeX, …). */
export function omePixels(xml: string): Record<string, string> | undefined {
  const tag = xml.match(/<(?:\w+:)?Pixels\b[^>]*>/)?.[0];
  return tag === undefined ? undefined : attributes(tag);
}

/** Image name per first IFD, from each `<Image Name>` and its first `<TiffData IFD>`. */
export function omeImageNames(xml: string): Map<number, string> {
  const names = new Map<number, string>();
  for (const match of xml.matchAll(/<(?:\w+:)?Image\b([^>]*)>([\s\S]*?)<\/(?:\w+:)?Image>/g)) {
    const name = attributes(match[1] ?? '').Name;
    const tiffData = match[2]?.match(/<(?:\w+:)?TiffData\b[^>]*>/)?.[0];
    const ifd = tiffData === undefined ? undefined : Number(attributes(tiffData).IFD ?? 0);
    if (name !== undefined && ifd !== undefined && Number.isSafeInteger(ifd)) names.set(ifd, name);
  }
  return names;
}
