export { type IfdPath, readTile, type TiffContext, type TiffEntry, TiffIfd } from './ifd';
export { allIfds, ifdAt, type OpenTiffOptions, openTiff, type TiffFile } from './parse';
export { Compression, FieldType, fieldSize, ResolutionUnit, Tag, tagName } from './tags';
export { decodeText, decodeValue, numbersOf, type TagValue } from './values';
