import { createHash, type Hash } from 'node:crypto';

/** How many uploads' hashes a process keeps; one left out is hashed again by ingest. */
const KEPT_UPLOADS = 1000;

/**
 * The SHA-256 of each upload's bytes so far, kept by the process that received them, so that
 * the hash is ready when the last byte lands. Node's hash state cannot be saved elsewhere: an
 * upload whose chunks went through another process (or a restart) is hashed once its object
 * stands, by reading it (activities/uploads.ts).
 */
export function createUploadHashes(kept = KEPT_UPLOADS) {
  const hashes = new Map<string, { offset: number; hash: Hash }>();
  return {
    /** A hash of the first `offset` bytes to go on with (a copy), or undefined when this process did not see them. */
    resume(uploadId: string, offset: number): Hash | undefined {
      if (offset === 0) return createHash('sha256');
      const entry = hashes.get(uploadId);
      return entry?.offset === offset ? entry.hash.copy() : undefined;
    },
    keep(uploadId: string, offset: number, hash: Hash): void {
      hashes.delete(uploadId);
      hashes.set(uploadId, { offset, hash });
      // A Map iterates in insertion order: the first key is the upload heard from longest ago.
      if (hashes.size > kept) hashes.delete(hashes.keys().next().value!);
    },
    forget(uploadId: string): void {
      hashes.delete(uploadId);
    },
  };
}
