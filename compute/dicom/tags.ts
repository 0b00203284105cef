/** A tag as one unsigned number, `(group << 16) | element`, so tags compare in file order. */
export function tagOf(group: number, element: number): number {
  return ((group << 16) | element) >>> 0;
}

export function groupOf(tag: number): number {
  return tag >>> 16;
}

/** `(0010,0010)`, the form every DICOM tool prints. */
export function formatTag(tag: number): string {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
  return `(${hex(tag >>> 16)},${hex(tag & 0xffff)})`;
}

export const Tag = {
  FileMetaInformationGroupLength: tagOf(0x0002, 0x0000),
  FileMetaInformationVersion: tagOf(0x0002, 0x0001),
  MediaStorageSopClassUid: tagOf(0x0002, 0x0002),
  MediaStorageSopInstanceUid: tagOf(0x0002, 0x0003),
  TransferSyntaxUid: tagOf(0x0002, 0x0010),
  ImplementationClassUid: tagOf(0x0002, 0x0012),
  ImplementationVersionName: tagOf(0x0002, 0x0013),
  ImageType: tagOf(0x0008, 0x0008),
  SopClassUid: tagOf(0x0008, 0x0016),
  SopInstanceUid: tagOf(0x0008, 0x0018),
  Modality: tagOf(0x0008, 0x0060),
  Manufacturer: tagOf(0x0008, 0x0070),
  CodeValue: tagOf(0x0008, 0x0100),
  CodingSchemeDesignator: tagOf(0x0008, 0x0102),
  CodeMeaning: tagOf(0x0008, 0x0104),
  ManufacturerModelName: tagOf(0x0008, 0x1090),
  SoftwareVersions: tagOf(0x0018, 0x1020),
  PatientIdentityRemoved: tagOf(0x0012, 0x0062),
  DeidentificationMethod: tagOf(0x0012, 0x0063),
  DeidentificationMethodCodeSequence: tagOf(0x0012, 0x0064),
  DimensionOrganizationType: tagOf(0x0020, 0x9311),
  SamplesPerPixel: tagOf(0x0028, 0x0002),
  PhotometricInterpretation: tagOf(0x0028, 0x0004),
  PlanarConfiguration: tagOf(0x0028, 0x0006),
  NumberOfFrames: tagOf(0x0028, 0x0008),
  Rows: tagOf(0x0028, 0x0010),
  Columns: tagOf(0x0028, 0x0011),
  PixelSpacing: tagOf(0x0028, 0x0030),
  BitsAllocated: tagOf(0x0028, 0x0100),
  PixelRepresentation: tagOf(0x0028, 0x0103),
  BurnedInAnnotation: tagOf(0x0028, 0x0301),
  PixelMeasuresSequence: tagOf(0x0028, 0x9110),
  TotalPixelMatrixColumns: tagOf(0x0048, 0x0006),
  TotalPixelMatrixRows: tagOf(0x0048, 0x0007),
  ObjectiveLensPower: tagOf(0x0048, 0x0112),
  OpticalPathSequence: tagOf(0x0048, 0x0105),
  PlanePositionSlideSequence: tagOf(0x0048, 0x021a),
  ColumnPositionInTotalImagePixelMatrix: tagOf(0x0048, 0x021e),
  RowPositionInTotalImagePixelMatrix: tagOf(0x0048, 0x021f),
  NumberOfOpticalPaths: tagOf(0x0048, 0x0302),
  TotalPixelMatrixFocalPlanes: tagOf(0x0048, 0x0303),
  SharedFunctionalGroupsSequence: tagOf(0x5200, 0x9229),
  PerFrameFunctionalGroupsSequence: tagOf(0x5200, 0x9230),
  ExtendedOffsetTable: tagOf(0x7fe0, 0x0001),
  ExtendedOffsetTableLengths: tagOf(0x7fe0, 0x0002),
  PixelData: tagOf(0x7fe0, 0x0010),
  Item: tagOf(0xfffe, 0xe000),
  ItemDelimitation: tagOf(0xfffe, 0xe00d),
  SequenceDelimitation: tagOf(0xfffe, 0xe0dd),
} as const;

/** The length that means "until a delimiter". */
export const undefinedLength = 0xffffffff;

export const TransferSyntax = {
  ImplicitLittle: '1.2.840.10008.1.2',
  ExplicitLittle: '1.2.840.10008.1.2.1',
  DeflatedExplicitLittle: '1.2.840.10008.1.2.1.99',
  ExplicitBig: '1.2.840.10008.1.2.2',
  JpegBaseline: '1.2.840.10008.1.2.4.50',
  Jpeg2000Lossless: '1.2.840.10008.1.2.4.90',
  Jpeg2000: '1.2.840.10008.1.2.4.91',
} as const;

export type FrameCodec = 'none' | 'jpeg' | 'jpeg2000';

/** The transfer syntaxes read here, with how their dataset and frames are encoded. */
export const transferSyntaxes: ReadonlyMap<string, { explicit: boolean; codec: FrameCodec }> = new Map([
  [TransferSyntax.ImplicitLittle, { explicit: false, codec: 'none' }],
  [TransferSyntax.ExplicitLittle, { explicit: true, codec: 'none' }],
  [TransferSyntax.JpegBaseline, { explicit: true, codec: 'jpeg' }],
  [TransferSyntax.Jpeg2000Lossless, { explicit: true, codec: 'jpeg2000' }],
  [TransferSyntax.Jpeg2000, { explicit: true, codec: 'jpeg2000' }],
]);

export const WholeSlideMicroscopyStorage = '1.2.840.10008.5.1.4.1.1.77.1.6';

/** The root of every UID the standard itself defines (SOP classes, transfer syntaxes). */
export const standardUidRoot = '1.2.840.10008.';

/** VRs whose explicit header has two reserved bytes and a 4-byte length. */
const longVrs = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);

export function hasLongLength(vr: string): boolean {
  return longVrs.has(vr);
}

/** Text VRs padded with a space to an even length (UI pads with NUL instead). */
const textVrs = new Set([
  'AE',
  'AS',
  'CS',
  'DA',
  'DS',
  'DT',
  'IS',
  'LO',
  'LT',
  'PN',
  'SH',
  'ST',
  'TM',
  'UC',
  'UR',
  'UT',
]);

export function isTextVr(vr: string): boolean {
  return textVrs.has(vr) || vr === 'UI';
}

/**
 * VRs of the attributes this code reads or scrubs, for Implicit VR datasets, which carry none.
 * Anything else reads as `UN` and is copied as bytes; the names label the de-id report.
 */
const dictionary: ReadonlyArray<readonly [number, string, string]> = [
  [Tag.ImageType, 'CS', 'ImageType'],
  [tagOf(0x0008, 0x0012), 'DA', 'InstanceCreationDate'],
  [tagOf(0x0008, 0x0013), 'TM', 'InstanceCreationTime'],
  [tagOf(0x0008, 0x0014), 'UI', 'InstanceCreatorUID'],
  [Tag.SopClassUid, 'UI', 'SOPClassUID'],
  [Tag.SopInstanceUid, 'UI', 'SOPInstanceUID'],
  [tagOf(0x0008, 0x0020), 'DA', 'StudyDate'],
  [tagOf(0x0008, 0x0021), 'DA', 'SeriesDate'],
  [tagOf(0x0008, 0x0022), 'DA', 'AcquisitionDate'],
  [tagOf(0x0008, 0x0023), 'DA', 'ContentDate'],
  [tagOf(0x0008, 0x002a), 'DT', 'AcquisitionDateTime'],
  [tagOf(0x0008, 0x0030), 'TM', 'StudyTime'],
  [tagOf(0x0008, 0x0031), 'TM', 'SeriesTime'],
  [tagOf(0x0008, 0x0032), 'TM', 'AcquisitionTime'],
  [tagOf(0x0008, 0x0033), 'TM', 'ContentTime'],
  [tagOf(0x0008, 0x0050), 'SH', 'AccessionNumber'],
  [tagOf(0x0008, 0x0051), 'SQ', 'IssuerOfAccessionNumberSequence'],
  [Tag.Modality, 'CS', 'Modality'],
  [Tag.Manufacturer, 'LO', 'Manufacturer'],
  [tagOf(0x0008, 0x0080), 'LO', 'InstitutionName'],
  [tagOf(0x0008, 0x0081), 'ST', 'InstitutionAddress'],
  [tagOf(0x0008, 0x0082), 'SQ', 'InstitutionCodeSequence'],
  [tagOf(0x0008, 0x0090), 'PN', 'ReferringPhysicianName'],
  [tagOf(0x0008, 0x0092), 'ST', 'ReferringPhysicianAddress'],
  [tagOf(0x0008, 0x0094), 'SH', 'ReferringPhysicianTelephoneNumbers'],
  [tagOf(0x0008, 0x0096), 'SQ', 'ReferringPhysicianIdentificationSequence'],
  [Tag.CodeValue, 'SH', 'CodeValue'],
  [Tag.CodingSchemeDesignator, 'SH', 'CodingSchemeDesignator'],
  [Tag.CodeMeaning, 'LO', 'CodeMeaning'],
  [tagOf(0x0008, 0x010c), 'UI', 'CodingSchemeUID'],
  [tagOf(0x0008, 0x1010), 'SH', 'StationName'],
  [tagOf(0x0008, 0x1030), 'LO', 'StudyDescription'],
  [tagOf(0x0008, 0x103e), 'LO', 'SeriesDescription'],
  [tagOf(0x0008, 0x1040), 'LO', 'InstitutionalDepartmentName'],
  [tagOf(0x0008, 0x1048), 'PN', 'PhysiciansOfRecord'],
  [tagOf(0x0008, 0x1050), 'PN', 'PerformingPhysicianName'],
  [tagOf(0x0008, 0x1060), 'PN', 'NameOfPhysiciansReadingStudy'],
  [tagOf(0x0008, 0x1070), 'PN', 'OperatorsName'],
  [tagOf(0x0008, 0x1080), 'LO', 'AdmittingDiagnosesDescription'],
  [Tag.ManufacturerModelName, 'LO', 'ManufacturerModelName'],
  [tagOf(0x0008, 0x1110), 'SQ', 'ReferencedStudySequence'],
  [tagOf(0x0008, 0x1111), 'SQ', 'ReferencedPerformedProcedureStepSequence'],
  [tagOf(0x0008, 0x1120), 'SQ', 'ReferencedPatientSequence'],
  [tagOf(0x0008, 0x1140), 'SQ', 'ReferencedImageSequence'],
  [tagOf(0x0008, 0x1150), 'UI', 'ReferencedSOPClassUID'],
  [tagOf(0x0008, 0x1155), 'UI', 'ReferencedSOPInstanceUID'],
  [tagOf(0x0008, 0x2111), 'ST', 'DerivationDescription'],
  [tagOf(0x0010, 0x0010), 'PN', 'PatientName'],
  [tagOf(0x0010, 0x0020), 'LO', 'PatientID'],
  [tagOf(0x0010, 0x0030), 'DA', 'PatientBirthDate'],
  [tagOf(0x0010, 0x0040), 'CS', 'PatientSex'],
  [tagOf(0x0010, 0x1000), 'LO', 'OtherPatientIDs'],
  [tagOf(0x0010, 0x1001), 'PN', 'OtherPatientNames'],
  [tagOf(0x0010, 0x1010), 'AS', 'PatientAge'],
  [Tag.PatientIdentityRemoved, 'CS', 'PatientIdentityRemoved'],
  [Tag.DeidentificationMethod, 'LO', 'DeidentificationMethod'],
  [Tag.DeidentificationMethodCodeSequence, 'SQ', 'DeidentificationMethodCodeSequence'],
  [tagOf(0x0018, 0x1000), 'LO', 'DeviceSerialNumber'],
  [tagOf(0x0018, 0x1002), 'UI', 'DeviceUID'],
  [Tag.SoftwareVersions, 'LO', 'SoftwareVersions'],
  [tagOf(0x0018, 0x1030), 'LO', 'ProtocolName'],
  [tagOf(0x0018, 0x9074), 'DT', 'FrameAcquisitionDateTime'],
  [tagOf(0x0018, 0x9151), 'DT', 'FrameReferenceDateTime'],
  [tagOf(0x0020, 0x000d), 'UI', 'StudyInstanceUID'],
  [tagOf(0x0020, 0x000e), 'UI', 'SeriesInstanceUID'],
  [tagOf(0x0020, 0x0010), 'SH', 'StudyID'],
  [tagOf(0x0020, 0x0052), 'UI', 'FrameOfReferenceUID'],
  [tagOf(0x0020, 0x4000), 'LT', 'ImageComments'],
  [tagOf(0x0020, 0x9158), 'LT', 'FrameComments'],
  [tagOf(0x0020, 0x9164), 'UI', 'DimensionOrganizationUID'],
  [tagOf(0x0020, 0x9221), 'SQ', 'DimensionOrganizationSequence'],
  [tagOf(0x0020, 0x9222), 'SQ', 'DimensionIndexSequence'],
  [Tag.DimensionOrganizationType, 'CS', 'DimensionOrganizationType'],
  [Tag.SamplesPerPixel, 'US', 'SamplesPerPixel'],
  [Tag.PhotometricInterpretation, 'CS', 'PhotometricInterpretation'],
  [Tag.PlanarConfiguration, 'US', 'PlanarConfiguration'],
  [Tag.NumberOfFrames, 'IS', 'NumberOfFrames'],
  [Tag.Rows, 'US', 'Rows'],
  [Tag.Columns, 'US', 'Columns'],
  [Tag.PixelSpacing, 'DS', 'PixelSpacing'],
  [Tag.BitsAllocated, 'US', 'BitsAllocated'],
  [tagOf(0x0028, 0x0101), 'US', 'BitsStored'],
  [tagOf(0x0028, 0x0102), 'US', 'HighBit'],
  [Tag.PixelRepresentation, 'US', 'PixelRepresentation'],
  [Tag.BurnedInAnnotation, 'CS', 'BurnedInAnnotation'],
  [Tag.PixelMeasuresSequence, 'SQ', 'PixelMeasuresSequence'],
  [tagOf(0x0040, 0x0512), 'LO', 'ContainerIdentifier'],
  [tagOf(0x0040, 0x0513), 'SQ', 'IssuerOfTheContainerIdentifierSequence'],
  [tagOf(0x0040, 0x0515), 'SQ', 'AlternateContainerIdentifierSequence'],
  [tagOf(0x0040, 0x0551), 'LO', 'SpecimenIdentifier'],
  [tagOf(0x0040, 0x0554), 'UI', 'SpecimenUID'],
  [tagOf(0x0040, 0x0560), 'SQ', 'SpecimenDescriptionSequence'],
  [tagOf(0x0040, 0x0562), 'SQ', 'IssuerOfTheSpecimenIdentifierSequence'],
  [tagOf(0x0040, 0x0600), 'LO', 'SpecimenShortDescription'],
  [tagOf(0x0040, 0x0602), 'UT', 'SpecimenDetailedDescription'],
  [tagOf(0x0040, 0x0610), 'SQ', 'SpecimenPreparationSequence'],
  [tagOf(0x0040, 0x0612), 'SQ', 'SpecimenPreparationStepContentItemSequence'],
  [tagOf(0x0040, 0xa075), 'PN', 'VerifyingObserverName'],
  [tagOf(0x0040, 0xa120), 'DT', 'DateTime'],
  [tagOf(0x0040, 0xa121), 'DA', 'Date'],
  [tagOf(0x0040, 0xa122), 'TM', 'Time'],
  [tagOf(0x0040, 0xa123), 'PN', 'PersonName'],
  [tagOf(0x0040, 0xa160), 'UT', 'TextValue'],
  [tagOf(0x0040, 0xa730), 'SQ', 'ContentSequence'],
  [Tag.TotalPixelMatrixColumns, 'UL', 'TotalPixelMatrixColumns'],
  [Tag.TotalPixelMatrixRows, 'UL', 'TotalPixelMatrixRows'],
  [Tag.OpticalPathSequence, 'SQ', 'OpticalPathSequence'],
  [Tag.ObjectiveLensPower, 'DS', 'ObjectiveLensPower'],
  [Tag.PlanePositionSlideSequence, 'SQ', 'PlanePositionSlideSequence'],
  [Tag.ColumnPositionInTotalImagePixelMatrix, 'SL', 'ColumnPositionInTotalImagePixelMatrix'],
  [Tag.RowPositionInTotalImagePixelMatrix, 'SL', 'RowPositionInTotalImagePixelMatrix'],
  [Tag.NumberOfOpticalPaths, 'UL', 'NumberOfOpticalPaths'],
  [Tag.TotalPixelMatrixFocalPlanes, 'UL', 'TotalPixelMatrixFocalPlanes'],
  [tagOf(0x0070, 0x0084), 'PN', 'ContentCreatorName'],
  [tagOf(0x0088, 0x0200), 'SQ', 'IconImageSequence'],
  [tagOf(0x0400, 0x0561), 'SQ', 'OriginalAttributesSequence'],
  [Tag.SharedFunctionalGroupsSequence, 'SQ', 'SharedFunctionalGroupsSequence'],
  [Tag.PerFrameFunctionalGroupsSequence, 'SQ', 'PerFrameFunctionalGroupsSequence'],
  [Tag.ExtendedOffsetTable, 'OV', 'ExtendedOffsetTable'],
  [Tag.ExtendedOffsetTableLengths, 'OV', 'ExtendedOffsetTableLengths'],
  [Tag.PixelData, 'OB', 'PixelData'],
  [tagOf(0xfffa, 0xfffa), 'SQ', 'DigitalSignaturesSequence'],
];

const vrs = new Map(dictionary.map(([tag, vr]) => [tag, vr]));
const keywords = new Map(dictionary.map(([tag, , keyword]) => [tag, keyword]));

/** The VR an Implicit VR dataset leaves out; `UN` for tags outside the dictionary. */
export function implicitVr(tag: number): string {
  return vrs.get(tag) ?? 'UN';
}

/** `PatientName`, or `(0009,1001)` for a tag outside the dictionary. */
export function tagName(tag: number): string {
  return keywords.get(tag) ?? formatTag(tag);
}
