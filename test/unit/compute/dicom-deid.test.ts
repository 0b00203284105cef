import { readFile } from 'node:fs/promises';
import {
  type DicomDeidReport,
  type DicomFile,
  DicomTag,
  deidentifyDicom,
  openDicomSlide,
  parseDicom,
  probeDicom,
  tagOf,
} from '../../../compute/dicom';
import { isComputeError } from '../../../compute/errors';
import { bytesSource } from '../../../compute/source';
import { dicomLevel0, type El, tinyWsi, withElements } from './dicom-helpers';
import { MemorySink } from './helpers';

/** Identifying values a real slide could carry; none may survive anywhere in the copy. */
const markers = {
  patientName: 'MARKER^PATIENT',
  patientId: 'MRN-4815162342',
  issuer: 'ISSUER-OF-MRN',
  birthDate: '19710304',
  age: '052Y',
  otherIds: 'OTHER-ID-77',
  accession: 'ACC-99887766',
  institution: 'Marker General Hospital',
  address: '1 Marker Street, Springfield',
  referrer: 'DR^REFERRER',
  operator: 'OPERATOR^MARKER',
  studyDate: '20190101',
  studyTime: '101112',
  seriesDate: '20190102',
  seriesTime: '131415',
  acquired: '20190103161718',
  studyId: 'STUDY-5551',
  serial: 'SERIAL-SN-31337',
  container: 'CONTAINER-S12-3456',
  specimen: 'SPECIMEN-S12-3456-A1',
  specimenUid: '1.2.3.999.4242',
  specimenText: 'Biopsy of MARKER',
  lab: 'MARKER-LAB',
  privateCreator: 'MARKER CREATOR',
  privateValue: 'PRIVATE-SECRET-42',
  contentCreator: 'CREATOR^MARKER',
};

/** The sample's own values that identify its origin: its content date and its UID root. */
const originals = ['20210720', '133842', '1.2.276.0.7230010'];

const identifying: El[] = [
  { tag: tagOf(0x0008, 0x0020), vr: 'DA', value: markers.studyDate },
  { tag: tagOf(0x0008, 0x0021), vr: 'DA', value: markers.seriesDate },
  { tag: tagOf(0x0008, 0x002a), vr: 'DT', value: markers.acquired },
  { tag: tagOf(0x0008, 0x0030), vr: 'TM', value: markers.studyTime },
  { tag: tagOf(0x0008, 0x0031), vr: 'TM', value: markers.seriesTime },
  { tag: tagOf(0x0008, 0x0050), vr: 'SH', value: markers.accession },
  { tag: tagOf(0x0008, 0x0080), vr: 'LO', value: markers.institution },
  { tag: tagOf(0x0008, 0x0081), vr: 'ST', value: markers.address },
  { tag: tagOf(0x0008, 0x0090), vr: 'PN', value: markers.referrer },
  { tag: tagOf(0x0008, 0x1070), vr: 'PN', value: markers.operator },
  { tag: tagOf(0x0009, 0x0010), vr: 'LO', value: markers.privateCreator },
  { tag: tagOf(0x0009, 0x1001), vr: 'LO', value: markers.privateValue },
  { tag: tagOf(0x0010, 0x0010), vr: 'PN', value: markers.patientName },
  { tag: tagOf(0x0010, 0x0020), vr: 'LO', value: markers.patientId },
  { tag: tagOf(0x0010, 0x0021), vr: 'LO', value: markers.issuer },
  { tag: tagOf(0x0010, 0x0030), vr: 'DA', value: markers.birthDate },
  { tag: tagOf(0x0010, 0x0040), vr: 'CS', value: 'F' },
  { tag: tagOf(0x0010, 0x1000), vr: 'LO', value: markers.otherIds },
  { tag: tagOf(0x0010, 0x1010), vr: 'AS', value: markers.age },
  { tag: tagOf(0x0018, 0x1000), vr: 'LO', value: markers.serial },
  { tag: tagOf(0x0020, 0x0010), vr: 'SH', value: markers.studyId },
  { tag: tagOf(0x0040, 0x0512), vr: 'LO', value: markers.container },
  {
    tag: tagOf(0x0040, 0x0560),
    vr: 'SQ',
    undefinedLength: true,
    value: [
      [
        { tag: tagOf(0x0040, 0x0551), vr: 'LO', value: markers.specimen },
        { tag: tagOf(0x0040, 0x0554), vr: 'UI', value: markers.specimenUid },
        {
          tag: tagOf(0x0040, 0x0562),
          vr: 'SQ',
          value: [[{ tag: tagOf(0x0040, 0x0031), vr: 'UT', value: markers.lab }]],
        },
        { tag: tagOf(0x0040, 0x0600), vr: 'LO', value: markers.specimenText },
      ],
    ],
  },
  { tag: tagOf(0x0070, 0x0084), vr: 'PN', value: markers.contentCreator },
];

interface Copy {
  input: Buffer;
  output: Buffer;
  report: DicomDeidReport;
}

async function deidentify(input: Uint8Array, uidKey?: Uint8Array): Promise<Copy> {
  const sink = new MemorySink();
  const report = await deidentifyDicom(bytesSource(input), sink, uidKey === undefined ? {} : { uidKey });
  return { input: Buffer.from(input), output: sink.bytes(), report };
}

function frameBytes(file: DicomFile, bytes: Buffer): Buffer[] {
  if (file.pixelData?.kind !== 'encapsulated') throw new Error('expected encapsulated pixel data');
  return file.pixelData.frames.map((f) => bytes.subarray(f.offset, f.offset + f.length));
}

describe('deidentifyDicom: CMU-1-Small-Region level 0 with identifying values added', () => {
  const uidKey = Buffer.from('a test key, not a secret');
  let copy: Copy;
  beforeAll(async () => {
    const input = await withElements(await readFile(dicomLevel0), identifying);
    copy = await deidentify(input, uidKey);
  });

  test('every marker was in the input and none survives anywhere in the output bytes', () => {
    for (const value of [...Object.values(markers), ...originals]) {
      expect([value, copy.input.includes(value)]).toEqual([value, true]);
      expect([value, copy.output.includes(value)]).toEqual([value, false]);
    }
  });

  test('the copy re-parses and probes the same; PatientIdentityRemoved is YES', async () => {
    const before = await probeDicom(bytesSource(copy.input));
    const after = await probeDicom(bytesSource(copy.output));
    expect(after).toEqual(before);
    expect(after.effectiveMpp).toBeCloseTo(0.499, 6);
    const { dataset, meta } = await parseDicom(bytesSource(copy.output));
    expect(dataset.string(DicomTag.PatientIdentityRemoved)).toBe('YES');
    expect(dataset.string(DicomTag.DeidentificationMethod)).toMatch(/PS3\.15/);
    const code = dataset.items(DicomTag.DeidentificationMethodCodeSequence)[0];
    expect(code?.string(DicomTag.CodeValue)).toBe('113100');
    expect(meta.string(DicomTag.MediaStorageSopInstanceUid)).toBe(dataset.string(DicomTag.SopInstanceUid));
  });

  test('Type 2 attributes stay present but empty; Type 1 identifiers get a dummy', async () => {
    const { dataset } = await parseDicom(bytesSource(copy.output));
    for (const tag of [
      tagOf(0x10, 0x10),
      tagOf(0x10, 0x20),
      tagOf(0x10, 0x30),
      tagOf(0x10, 0x40),
      tagOf(8, 0x90),
    ]) {
      expect(dataset.get(tag)?.length).toBe(0);
    }
    for (const tag of [
      tagOf(0x10, 0x21),
      tagOf(0x10, 0x1010),
      tagOf(8, 0x80),
      tagOf(9, 0x10),
      tagOf(9, 0x1001),
    ]) {
      expect(dataset.get(tag)).toBeUndefined();
    }
    expect(dataset.string(tagOf(0x40, 0x512))).toBe('REMOVED');
    expect(dataset.string(tagOf(8, 0x23))).toBe('19000101');
    const specimen = dataset.items(tagOf(0x40, 0x560))[0];
    expect(specimen?.string(tagOf(0x40, 0x551))).toBe('REMOVED');
    expect(specimen?.items(tagOf(0x40, 0x562))).toEqual([]);
    expect(specimen?.string(tagOf(0x40, 0x554))).toMatch(/^2\.25\.\d+$/);
    expect(copy.report.privateElementsRemoved).toBe(2);
    expect(copy.report.removed).toEqual(
      expect.arrayContaining(['InstitutionName', 'OperatorsName', 'PatientAge', 'SeriesDate']),
    );
    // Any Person Name goes, listed or not (ContentCreatorName is not in the table).
    expect(copy.report.emptied).toEqual(
      expect.arrayContaining(['PatientName', 'StudyDate', 'ContentCreatorName']),
    );
    expect(copy.report.replaced).toEqual(expect.arrayContaining(['ContainerIdentifier', 'ContentDate']));
  });

  test('frames are copied byte for byte, so regions read bit-identical', async () => {
    const inputFile = await parseDicom(bytesSource(copy.input));
    const outputFile = await parseDicom(bytesSource(copy.output));
    const a = frameBytes(inputFile, copy.input);
    const b = frameBytes(outputFile, copy.output);
    expect(b).toHaveLength(30);
    for (const [i, frame] of a.entries()) expect(frame.equals(b[i]!)).toBe(true);
    const region = { level: 0, x: 480, y: 970, width: 600, height: 60 };
    const [x, y] = await Promise.all(
      [copy.input, copy.output].map(async (bytes) =>
        (await openDicomSlide(bytesSource(bytes))).readRegion(region),
      ),
    );
    expect(Buffer.from(x!.data).equals(Buffer.from(y!.data))).toBe(true);
    expect(copy.report.bytesWritten).toBe(copy.output.byteLength);
  });

  test('UIDs are replaced the same way under one key, differently under another', async () => {
    const again = await deidentify(copy.input, uidKey);
    expect(again.output.equals(copy.output)).toBe(true);
    const other = await deidentify(copy.input);
    const uidOf = async (bytes: Buffer) =>
      (await parseDicom(bytesSource(bytes))).dataset.string(tagOf(0x20, 0xd));
    expect(await uidOf(other.output)).not.toBe(await uidOf(copy.output));
    // The class UID names the kind of object and stays.
    const { dataset } = await parseDicom(bytesSource(copy.output));
    expect(dataset.string(DicomTag.SopClassUid)).toBe('1.2.840.10008.5.1.4.1.1.77.1.6');
  });
});

describe('deidentifyDicom: native pixels, Implicit VR, per-frame groups', () => {
  const frames = [new Uint8Array(12).fill(10), new Uint8Array(12).fill(20)];
  const frameContent = (i: number): El => ({
    tag: tagOf(0x0020, 0x9111),
    vr: 'SQ',
    value: [[{ tag: tagOf(0x0018, 0x9074), vr: 'DT', value: `2019010${i}101010` }]],
  });

  test.each([true, false])('explicit VR %s: dates in per-frame groups go, pixels stay', async (explicit) => {
    const input = tinyWsi({
      width: 4,
      height: 2,
      frameWidth: 2,
      frameHeight: 2,
      frames,
      explicit,
      positions: [
        [1, 1],
        [3, 1],
      ],
      perFrame: (i) => [frameContent(i)],
      extra: [{ tag: tagOf(0x10, 0x10), vr: 'PN', value: markers.patientName }],
    });
    const copy = await deidentify(input);
    for (const value of [markers.patientName, '20190100101010', '20190101101010']) {
      expect(copy.input.includes(value)).toBe(true);
      expect(copy.output.includes(value)).toBe(false);
    }
    const file = await parseDicom(bytesSource(copy.output));
    expect(file.explicit).toBe(explicit);
    expect(await probeDicom(bytesSource(copy.output))).toEqual(await probeDicom(bytesSource(input)));
    const read = async (bytes: Uint8Array) =>
      (await openDicomSlide(bytesSource(bytes))).readRegion({ level: 0, x: 0, y: 0, width: 4, height: 2 });
    expect([...(await read(copy.output)).data]).toEqual([...(await read(input)).data]);
    expect(copy.report.replaced).toContain('FrameAcquisitionDateTime');
  });

  test('a label image is refused before a byte is written, and the sink is destroyed', async () => {
    const input = tinyWsi({
      width: 2,
      height: 2,
      frameWidth: 2,
      frameHeight: 2,
      frames: [frames[0]!],
      imageType: 'ORIGINAL\\PRIMARY\\LABEL\\NONE',
    });
    const sink = new MemorySink();
    sink.on('error', () => {});
    const err = await deidentifyDicom(bytesSource(input), sink).catch((e: unknown) => e);
    expect(isComputeError(err, 'UnsupportedDicom')).toBe(true);
    expect(sink.destroyed).toBe(true);
    expect(sink.bytes().byteLength).toBe(0);
  });
});
