export type { DicomDataset, DicomElement } from './dataset';
export { type DicomDeidOptions, type DicomDeidReport, deidentifyDicom } from './deid';
export { type DicomFile, type ParseDicomOptions, type PixelData, parseDicom } from './parse';
export type { FrameRange } from './pixels';
export { type DicomLevel, type DicomProbe, probeDicom } from './probe';
export { type DicomSlide, type OpenDicomOptions, openDicomSlide } from './slide';
export { type FrameCodec, Tag as DicomTag, TransferSyntax, tagOf } from './tags';
