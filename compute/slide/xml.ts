/**
 * Just enough XML for the scanners' metadata (Leica SCN, Philips DP, Ventana XMP): elements,
 * attributes and text, read into a tree and written back. Attribute values keep their source
 * spelling (entities undecoded) so a document written back differs only where it was edited.
 * Declarations, comments, CDATA and doctypes are dropped on reading: none carries what a reader
 * of these files needs, and a comment is free text.
 */
export interface XmlElement {
  name: string;
  /** In document order; values as written, entities not decoded (see `attr`). */
  attributes: Array<[string, string]>;
  children: XmlNode[];
}

export type XmlNode = XmlElement | string;

const token = /<!--[\s\S]*?-->|<!\[CDATA\[[\s\S]*?\]\]>|<![^>]*>|<\?[\s\S]*?\?>|<\/?[^>]+>|[^<]+/g;

/** The document's root element, or undefined when the text is not well-formed enough to read. */
export function parseXml(text: string): XmlElement | undefined {
  const root: XmlElement = { name: '#document', attributes: [], children: [] };
  const open: XmlElement[] = [root];
  for (const [part] of text.matchAll(token)) {
    const parent = open[open.length - 1];
    if (parent === undefined) return undefined;
    if (!part.startsWith('<')) {
      if (parent !== root) parent.children.push(part);
      continue;
    }
    if (/^<[!?]/.test(part)) continue;
    if (part.startsWith('</')) {
      if (part.slice(2, -1).trim() !== parent.name || open.length === 1) return undefined;
      open.pop();
      continue;
    }
    const element = elementOf(part);
    if (element === undefined) return undefined;
    parent.children.push(element);
    if (!part.endsWith('/>')) open.push(element);
  }
  const elements = root.children.filter(isElement);
  return open.length === 1 && elements.length === 1 ? elements[0] : undefined;
}

function elementOf(tag: string): XmlElement | undefined {
  const body = tag.slice(1, tag.endsWith('/>') ? -2 : -1);
  const name = body.match(/^[^\s/>]+/)?.[0];
  if (name === undefined) return undefined;
  const attributes: Array<[string, string]> = [];
  for (const match of body.slice(name.length).matchAll(/([^\s=]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g)) {
    attributes.push([match[1] ?? '', match[2] ?? match[3] ?? '']);
  }
  return { name, attributes, children: [] };
}

export function isElement(node: XmlNode): node is XmlElement {
  return typeof node !== 'string';
}

/** The element name without its namespace prefix. */
export function localName(element: XmlElement): string {
  return element.name.slice(element.name.indexOf(':') + 1);
}

/** An attribute's value with the five predefined entities decoded. */
export function attr(element: XmlElement, name: string): string | undefined {
  const raw = element.attributes.find(([key]) => key === name)?.[1];
  return raw === undefined ? undefined : decodeEntities(raw);
}

export function childElements(element: XmlElement, name?: string): XmlElement[] {
  return element.children.filter(
    (node): node is XmlElement => isElement(node) && (name === undefined || localName(node) === name),
  );
}

/** The first element at the end of a path of local names below `element`. */
export function find(element: XmlElement, ...path: string[]): XmlElement | undefined {
  let at: XmlElement | undefined = element;
  for (const name of path) at = at === undefined ? undefined : childElements(at, name)[0];
  return at;
}

/** Every element below `element` (itself included) with this local name, in document order. */
export function findAll(element: XmlElement, name: string): XmlElement[] {
  const found = localName(element) === name ? [element] : [];
  for (const child of childElements(element)) found.push(...findAll(child, name));
  return found;
}

export function textOf(element: XmlElement): string {
  return decodeEntities(element.children.map((node) => (isElement(node) ? textOf(node) : node)).join(''));
}

export function formatXml(
  element: XmlElement,
  declaration = '<?xml version="1.0" encoding="UTF-8"?>\n',
): string {
  return `${declaration}${serialize(element)}\n`;
}

function serialize(element: XmlElement): string {
  const attributes = element.attributes.map(([key, value]) => ` ${key}="${value}"`).join('');
  if (element.children.length === 0) return `<${element.name}${attributes}/>`;
  const body = element.children.map((node) => (isElement(node) ? serialize(node) : node)).join('');
  return `<${element.name}${attributes}>${body}</${element.name}>`;
}

function decodeEntities(text: string): string {
  return text
    .replaceAll('&quot;', '"')
    .replaceAll('&apos;', "'")
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replace(/&#(x?)([0-9a-fA-F]+);/g, (_, hex, digits) =>
      String.fromCodePoint(parseInt(digits, hex ? 16 : 10)),
    )
    .replaceAll('&amp;', '&');
}

/** What an allowlist keeps of one element: its attributes, and whether its text is kept. */
export interface XmlRule {
  attributes: readonly string[];
  text?: boolean;
}

/**
 * Keeps of `root` only what the rules name: an element without a rule goes with everything
 * under it, an attribute not listed goes, and so does text where the rule does not keep it
 * (layout whitespace stays). `removed` collects `prefix.element`, `prefix.@attribute` and
 * `prefix.element#text` for the report. An allowlist, so a field a newer scanner adds is
 * dropped until someone decides it is harmless.
 */
export function scrubXml(
  root: XmlElement,
  ruleOf: (element: XmlElement) => XmlRule | undefined,
  prefix: string,
  removed: Set<string>,
): XmlElement | undefined {
  const rule = ruleOf(root);
  if (rule === undefined) {
    removed.add(`${prefix}.${localName(root)}`);
    return undefined;
  }
  const attributes = root.attributes.filter(([key]) => {
    const keep = rule.attributes.includes(key) || key === 'xmlns' || key.startsWith('xmlns:');
    if (!keep) removed.add(`${prefix}.@${key}`);
    return keep;
  });
  const children: XmlNode[] = [];
  for (const node of root.children) {
    if (isElement(node)) {
      const kept = scrubXml(node, ruleOf, prefix, removed);
      if (kept !== undefined) children.push(kept);
    } else if (rule.text === true || node.trim() === '') {
      children.push(node);
    } else {
      removed.add(`${prefix}.${localName(root)}#text`);
    }
  }
  return { name: root.name, attributes, children };
}
