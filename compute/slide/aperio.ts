/**
 * Aperio's ImageDescription: a header (the `Aperio Image Library` line and the geometry), then
 * `|`-separated `key = value` pairs. Parsed as OpenSlide parses it, so what we read and what we
 * write back stay readable by OpenSlide.
 */
export interface AperioDescription {
  header: string;
  properties: Array<{ key: string; value: string }>;
}

export function isAperioDescription(description: string | undefined): description is string {
  return description?.startsWith('Aperio') ?? false;
}

export function parseAperioDescription(description: string): AperioDescription {
  const [header = '', ...pairs] = description.split('|');
  const properties = pairs.map((pair) => {
    const at = pair.indexOf(' = ');
    return at < 0
      ? { key: pair.trim(), value: '' }
      : { key: pair.slice(0, at).trim(), value: pair.slice(at + 3) };
  });
  return { header, properties };
}

export function formatAperioDescription({ header, properties }: AperioDescription): string {
  return [header, ...properties.map(({ key, value }) => `${key} = ${value}`)].join('|');
}

/** The word after the header's first line names an associated image: `label 387x463`, `macro …`. */
export function aperioImageKind(description: string): string | undefined {
  const second = description.split(/\r?\n/)[1];
  return second?.match(/^(label|macro|thumbnail)\b/)?.[1];
}
