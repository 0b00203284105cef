import { randomBytes } from 'node:crypto';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { ComputeError } from '../errors';
import type { ByteSource } from '../source';
import type { DicomDataset, DicomElement } from './dataset';
import { type DicomFile, parseDicom, readItems } from './parse';
import { describeWsi } from './probe';
import { type Action, actionFor, dummyValue, isInstanceUid, uidReplacer } from './profile';
import { Tag, tagName } from './tags';
import { DicomWriter, encodeHeader, textValue } from './write';

export interface DicomDeidOptions {
  signal?: AbortSignal;
  /**
   * Key for replacing instance UIDs. Pass a stable secret (per organization, say) for a copy that
   * is the same bytes on every retry; without one a random key is drawn, so UIDs differ per run.
   */
  uidKey?: Uint8Array;
}

export interface DicomDeidReport {
  /** Keywords (or tags) of the standard attributes removed, emptied or given dummy values. */
  removed: string[];
  emptied: string[];
  replaced: string[];
  privateElementsRemoved: number;
  uidsReplaced: number;
  bytesWritten: number;
}

/** Our implementation UID (a `2.25.` UUID) and name, written in place of the source's. */
const implementationClassUid = '2.25.4550087043806256052109802668093532863';
const implementationVersionName = 'SPS_DEID_1';
const deidentificationMethod = 'PS3.15 Basic Profile; private tags and UIDs replaced';

/**
 * Writes a de-identified copy of a DICOM WSI instance to `sink` and ends it: identifying
 * attributes are removed, emptied or replaced (PS3.15 Basic Profile), private elements dropped,
 * instance UIDs replaced, and PatientIdentityRemoved set. Pixel data is copied byte for byte,
 * never decoded. Only an instance the service ingests (a VOLUME image, see `probeDicom`) is
 * accepted: a label or overview shows the slide label, which may carry a name.
 * On failure the sink is destroyed with the error, so an upload fed by it fails too.
 */
export async function deidentifyDicom(
  source: ByteSource,
  sink: Writable,
  options: DicomDeidOptions = {},
): Promise<DicomDeidReport> {
  try {
    return await writeCopy(source, sink, options);
  } catch (err) {
    sink.destroy(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
}

interface Context {
  file: DicomFile;
  writer: DicomWriter;
  replaceUid: (uid: string) => string;
  report: Omit<DicomDeidReport, 'removed' | 'emptied' | 'replaced' | 'bytesWritten'> & {
    removed: Set<string>;
    emptied: Set<string>;
    replaced: Set<string>;
  };
  signal: AbortSignal | undefined;
}

async function writeCopy(
  source: ByteSource,
  sink: Writable,
  options: DicomDeidOptions,
): Promise<DicomDeidReport> {
  const { signal } = options;
  const file = await parseDicom(source, { signal });
  describeWsi(file);
  if (file.dataset.string(Tag.BurnedInAnnotation) === 'YES') {
    throw new ComputeError(
      'UnsupportedDicom',
      'BurnedInAnnotation is YES: text in the pixels cannot be removed by a copy',
    );
  }
  const context: Context = {
    file,
    writer: new DicomWriter(sink, file.explicit, signal),
    replaceUid: uidReplacer(options.uidKey ?? randomBytes(32)),
    report: {
      removed: new Set(),
      emptied: new Set(),
      replaced: new Set(),
      privateElementsRemoved: 0,
      uidsReplaced: 0,
    },
    signal,
  };
  await context.writer.raw(new Uint8Array(128));
  await context.writer.raw(Uint8Array.from('DICM', (c) => c.charCodeAt(0)));
  await context.writer.raw(metaGroup(context));
  await writeDataset(context, file.dataset, 0);
  await context.writer.flush();
  sink.end();
  await finished(sink);
  const { report } = context;
  return {
    ...report,
    removed: [...report.removed].sort(),
    emptied: [...report.emptied].sort(),
    replaced: [...report.replaced].sort(),
    bytesWritten: context.writer.bytesWritten,
  };
}

/** A fresh meta group: the source's may name the sending station (SourceApplicationEntityTitle). */
function metaGroup({ file, replaceUid }: Context): Uint8Array {
  const sopClass =
    file.meta.string(Tag.MediaStorageSopClassUid) ?? file.dataset.string(Tag.SopClassUid) ?? '';
  const instance =
    file.meta.string(Tag.MediaStorageSopInstanceUid) ?? file.dataset.string(Tag.SopInstanceUid) ?? '';
  const elements: Array<[number, string, Uint8Array]> = [
    [Tag.FileMetaInformationVersion, 'OB', Uint8Array.of(0, 1)],
    [Tag.MediaStorageSopClassUid, 'UI', textValue('UI', sopClass)],
    [Tag.MediaStorageSopInstanceUid, 'UI', textValue('UI', replaceUid(instance))],
    [Tag.TransferSyntaxUid, 'UI', textValue('UI', file.transferSyntax)],
    [Tag.ImplementationClassUid, 'UI', textValue('UI', implementationClassUid)],
    [Tag.ImplementationVersionName, 'SH', textValue('SH', implementationVersionName)],
  ];
  const body = elements.flatMap(([tag, vr, value]) => [encodeHeader(tag, vr, value.byteLength, true), value]);
  const length = body.reduce((n, part) => n + part.byteLength, 0);
  const groupLength = new Uint8Array(4);
  new DataView(groupLength.buffer).setUint32(0, length, true);
  return Buffer.concat([
    encodeHeader(Tag.FileMetaInformationGroupLength, 'UL', 4, true),
    groupLength,
    ...body,
  ]);
}

async function writeDataset(context: Context, dataset: DicomDataset, depth: number): Promise<void> {
  let marked = depth > 0;
  for (const element of dataset.elements) {
    if (!marked && element.tag > Tag.DeidentificationMethodCodeSequence) {
      await writeDeidMarkers(context);
      marked = true;
    }
    await writeElement(context, element, depth);
  }
  if (!marked) await writeDeidMarkers(context);
}

/** PatientIdentityRemoved, the method in words, and the profile's code (DCM 113100). */
async function writeDeidMarkers({ writer }: Context): Promise<void> {
  await writer.element(Tag.PatientIdentityRemoved, 'CS', textValue('CS', 'YES'));
  await writer.element(Tag.DeidentificationMethod, 'LO', textValue('LO', deidentificationMethod));
  await writer.sequenceStart(Tag.DeidentificationMethodCodeSequence);
  await writer.itemStart();
  await writer.element(Tag.CodeValue, 'SH', textValue('SH', '113100'));
  await writer.element(Tag.CodingSchemeDesignator, 'SH', textValue('SH', 'DCM'));
  await writer.element(Tag.CodeMeaning, 'LO', textValue('LO', 'Basic Application Confidentiality Profile'));
  await writer.itemEnd();
  await writer.sequenceEnd();
}

async function writeElement(context: Context, element: DicomElement, depth: number): Promise<void> {
  const { writer, file } = context;
  if (element.tag === Tag.PixelData && depth === 0) {
    // Encapsulated frames are copied with their offset tables: those are relative, still right.
    const length = element.undefinedLength ? 0xffffffff : element.length;
    const range = { source: file.source, offset: element.valueOffset, length: element.length };
    await writer.copied({ tag: element.tag, vr: element.vr, length }, range);
    return;
  }
  const action = actionFor(element.tag, element.vr);
  note(context, element.tag, action);
  if (action === 'remove') return;
  if (action === 'empty') {
    await (element.isSequence
      ? writeEmptySequence(context, element.tag)
      : writer.element(element.tag, element.vr, new Uint8Array(0)));
    return;
  }
  if (action === 'dummy') {
    await writer.element(element.tag, element.vr, textValue(element.vr, dummyValue(element.vr)));
    return;
  }
  if (element.isSequence) return writeSequence(context, element, depth);
  if (element.vr === 'UI') return writeUid(context, element);
  if (element.value !== undefined) return writer.element(element.tag, element.vr, element.value);
  await writer.copied(element, { source: file.source, offset: element.valueOffset, length: element.length });
}

function note({ report }: Context, tag: number, action: Action): void {
  if (action === 'keep') return;
  if ((tag >>> 16) % 2 === 1) {
    report.privateElementsRemoved += 1;
    return;
  }
  const name = tagName(tag);
  if (action === 'remove') report.removed.add(name);
  else if (action === 'empty') report.emptied.add(name);
  else report.replaced.add(name);
}

async function writeEmptySequence({ writer }: Context, tag: number): Promise<void> {
  await writer.sequenceStart(tag);
  await writer.sequenceEnd();
}

/** Items are rewritten one by one; a deferred sequence (per-frame groups) is read one item at a time. */
async function writeSequence(context: Context, element: DicomElement, depth: number): Promise<void> {
  const { writer } = context;
  await writer.sequenceStart(element.tag);
  const writeItem = async (item: DicomDataset) => {
    await writer.itemStart();
    await writeDataset(context, item, depth + 1);
    await writer.itemEnd();
  };
  if (element.items !== undefined) {
    for (const item of element.items) await writeItem(item);
  } else {
    await readItems(context.file, element, writeItem, context.signal);
  }
  await writer.sequenceEnd();
}

async function writeUid(context: Context, element: DicomElement): Promise<void> {
  const value = element.value;
  if (value === undefined)
    throw new ComputeError('MalformedDicom', `a ${element.length}-byte UID at ${element.offset}`);
  const uids = new TextDecoder('latin1')
    .decode(value)
    .replace(/[\0 ]+$/, '')
    .split('\\');
  const replaced = uids.map((uid) => {
    const trimmed = uid.trim();
    if (!isInstanceUid(element.tag, trimmed)) return trimmed;
    context.report.uidsReplaced += 1;
    return context.replaceUid(trimmed);
  });
  await context.writer.element(element.tag, 'UI', textValue('UI', replaced.join('\\')));
}
