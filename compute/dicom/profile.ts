import { createHmac } from 'node:crypto';
import { groupOf, standardUidRoot, Tag, tagOf } from './tags';

/**
 * What the copy does with one element, after DICOM PS3.15 Annex E (Basic Application
 * Confidentiality Profile): `empty` for Type 2 attributes the IOD requires present, `dummy` for
 * Type 1 ones it requires valued, `remove` for the rest. UIDs are handled apart (`isInstanceUid`).
 */
export type Action = 'keep' | 'remove' | 'empty' | 'dummy';

const t = tagOf;

const listed = new Map<number, Action>([
  // Patient module, Type 2 in the WSI IOD: present and empty. The rest of group 0010 goes.
  [t(0x0010, 0x0010), 'empty'],
  [t(0x0010, 0x0020), 'empty'],
  [t(0x0010, 0x0030), 'empty'],
  [t(0x0010, 0x0040), 'empty'],
  // General Study, Type 2.
  [t(0x0008, 0x0020), 'empty'],
  [t(0x0008, 0x0030), 'empty'],
  [t(0x0008, 0x0050), 'empty'],
  [t(0x0008, 0x0090), 'empty'],
  [t(0x0020, 0x0010), 'empty'],
  // Type 1 in the WSI IOD (image, equipment, specimen modules): a dummy keeps the file valid.
  [t(0x0008, 0x0023), 'dummy'],
  [t(0x0008, 0x0033), 'dummy'],
  [t(0x0008, 0x002a), 'dummy'],
  [t(0x0018, 0x1000), 'dummy'],
  [t(0x0040, 0x0512), 'dummy'],
  [t(0x0040, 0x0551), 'dummy'],
  [t(0x0040, 0x0513), 'empty'],
  [t(0x0040, 0x0562), 'empty'],
  // Dates and free text inside per-frame groups and specimen preparation content items.
  [t(0x0018, 0x9074), 'dummy'],
  [t(0x0018, 0x9151), 'dummy'],
  [t(0x0040, 0xa120), 'dummy'],
  [t(0x0040, 0xa121), 'dummy'],
  [t(0x0040, 0xa122), 'dummy'],
  [t(0x0040, 0xa160), 'dummy'],
  ...removals().map((tag): [number, Action] => [tag, 'remove']),
]);

function removals(): number[] {
  const g08 = [
    0x0012, 0x0013, 0x0021, 0x0022, 0x0024, 0x0025, 0x0031, 0x0032, 0x0034, 0x0035, 0x0051, 0x0080, 0x0081,
    0x0082, 0x0092, 0x0094, 0x0096, 0x009c, 0x009d, 0x1010, 0x1030, 0x103e, 0x1040, 0x1041, 0x1048, 0x1049,
    0x1050, 0x1052, 0x1060, 0x1062, 0x1070, 0x1072, 0x1080, 0x1084, 0x1110, 0x1111, 0x1120, 0x2111, 0x4000,
  ];
  const g18 = [0x1004, 0x1005, 0x1007, 0x1008, 0x1030, 0xa002, 0xa003];
  const g20 = [0x4000, 0x9158];
  const g40 = [
    0x0241, 0x0242, 0x0243, 0x0244, 0x0245, 0x0250, 0x0251, 0x0253, 0x0254, 0x0275, 0x0280, 0x0515, 0x0600,
    0x0602, 0x1001, 0x1400, 0x2016, 0x2017, 0x2400, 0x3001, 0xa027, 0xa030, 0xa073, 0xa078, 0xa088, 0xa730,
  ];
  return [
    ...g08.map((e) => t(0x0008, e)),
    ...g18.map((e) => t(0x0018, e)),
    ...g20.map((e) => t(0x0020, e)),
    ...g40.map((e) => t(0x0040, e)),
    t(0x0070, 0x0001), // graphic annotations: free text drawn on the image
    t(0x0088, 0x0200), // icon image: a thumbnail may show the label
    t(0xfffa, 0xfffa), // digital signatures: invalid once anything changes
  ];
}

/**
 * Whole groups with nothing worth keeping: the meta group (never in a dataset), patient,
 * clinical trial and earlier de-identification records (ours replace them), study scheduling,
 * visit, original attributes and signatures, results, curves and overlays (burned-in text).
 */
function isRemovedGroup(group: number): boolean {
  return (
    group === 0x0002 ||
    group === 0x0010 ||
    group === 0x0012 ||
    group === 0x0032 ||
    group === 0x0038 ||
    group === 0x0400 ||
    group === 0x4008 ||
    (group >= 0x5000 && group <= 0x50ff) ||
    (group >= 0x6000 && group <= 0x60ff)
  );
}

export function actionFor(tag: number, vr: string): Action {
  const group = groupOf(tag);
  // Private groups (odd) can hold anything, and their VRs cannot be trusted: all go.
  if (group % 2 === 1) return 'remove';
  // Group lengths go stale as soon as anything in the group changes.
  if ((tag & 0xffff) === 0) return 'remove';
  const action = listed.get(tag);
  if (action !== undefined) return action;
  if (isRemovedGroup(group)) return 'remove';
  if (vr === 'PN') return 'empty';
  return 'keep';
}

/** A value for a Type 1 attribute that must stay present: a date nobody was born on, or a word. */
export function dummyValue(vr: string): string {
  switch (vr) {
    case 'DA':
      return '19000101';
    case 'TM':
      return '000000';
    case 'DT':
      return '19000101000000';
    default:
      return 'REMOVED';
  }
}

/** UIDs of classes and coding schemes, which name kinds of things, not instances: kept. */
const classUidTags = new Set([
  Tag.SopClassUid,
  t(0x0008, 0x001a),
  t(0x0008, 0x001b),
  t(0x0008, 0x0062),
  t(0x0008, 0x010c),
  t(0x0008, 0x010d),
  t(0x0008, 0x0117),
  t(0x0008, 0x0118),
  t(0x0008, 0x1150),
]);

/** Instance UIDs (study, series, SOP instance, frame of reference…) link back to the source PACS. */
export function isInstanceUid(tag: number, uid: string): boolean {
  return !classUidTags.has(tag) && !uid.startsWith(standardUidRoot) && uid !== '';
}

/**
 * Replaces instance UIDs with `2.25.` UUIDs derived by HMAC: the same UID maps to the same
 * replacement under one key (references inside the file stay consistent, and a retry writes the
 * same bytes), and nobody without the key can map a replacement back.
 */
export function uidReplacer(key: Uint8Array): (uid: string) => string {
  return (uid) => {
    const digest = createHmac('sha256', key).update(uid).digest().subarray(0, 16);
    // UUID version 8 (custom) and the RFC 9562 variant, so the result is a well-formed UUID.
    digest[6] = ((digest[6] ?? 0) & 0x0f) | 0x80;
    digest[8] = ((digest[8] ?? 0) & 0x3f) | 0x80;
    return `2.25.${BigInt(`0x${digest.toString('hex')}`).toString()}`;
  };
}
