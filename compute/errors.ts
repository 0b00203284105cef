/**
 * Tagged compute errors with one narrowing guard (zarrita style). Activities map the tag to an
 * `ApplicationFailure` type; every tag here is a fault of the input, so none is worth a retry.
 */
export type ComputeErrorTag =
  /** The bytes are not a TIFF at all (wrong magic, empty file). */
  | 'NotTiff'
  /** A read reached past the end of the source: the file is truncated or an offset is wrong. */
  | 'Truncated'
  /** The TIFF structure is inconsistent: loops, absurd counts or sizes, missing required tags. */
  | 'MalformedTiff'
  /** A valid TIFF that uses a feature this code does not handle. */
  | 'UnsupportedTiff'
  /** A whole-slide format recognised and refused by name (MIRAX, Olympus VSI, Hamamatsu VMS, SVSLIDE). */
  | 'UnsupportedFormat'
  /** The bytes are not a DICOM Part 10 file (no `DICM` preamble). */
  | 'NotDicom'
  /** The DICOM structure is inconsistent or lacks what a whole-slide image needs. */
  | 'MalformedDicom'
  /** A valid DICOM object this code does not handle (another SOP class, transfer syntax). */
  | 'UnsupportedDicom'
  /** A tile or frame whose compressed bytes do not decode to the size the file declares. */
  | 'CorruptTile'
  /** Declared dimensions beyond what the service ingests (a decompression bomb). */
  | 'TooLarge'
  /** A Zarr object that does not decode: a shard index out of bounds, a bad checksum or chunk. */
  | 'CorruptZarr'
  /** A Zarr array whose metadata asks for something our reader does not handle. */
  | 'UnsupportedZarr'
  /** A model file whose inputs or outputs are not what its spec promises. */
  | 'UnsupportedModel'
  /** A stored file of segmented tile objects that does not decode (truncated, another version). */
  | 'CorruptTileObjects';

export class ComputeError extends Error {
  readonly _tag: ComputeErrorTag;
  constructor(tag: ComputeErrorTag, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this._tag = tag;
    this.name = `ComputeError(${tag})`;
  }
}

export function isComputeError(err: unknown, tag?: ComputeErrorTag): err is ComputeError {
  return err instanceof ComputeError && (tag === undefined || err._tag === tag);
}
