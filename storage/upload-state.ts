import type { Readable } from 'node:stream';

/** What every backend's in-place upload state holds; each adds its own fields. */
export interface BaseUploadState {
  key: string;
  sizeBytes: number;
  /** Where the next chunk starts: every byte before it is stored. */
  offset: number;
}

export function encodeState<T extends BaseUploadState>(state: T): string {
  return JSON.stringify(state);
}

export function decodeState<T extends BaseUploadState>(state: string): T {
  return JSON.parse(state) as T;
}

/** The chunk must continue the upload and fit in it; anything else is a caller's bug. */
export function checkChunk(state: BaseUploadState, chunk: { offset: number; length: number }): void {
  if (chunk.offset !== state.offset)
    throw new Error(`chunk at ${chunk.offset} does not continue the upload at ${state.offset}`);
  if (chunk.length <= 0 || chunk.offset + chunk.length > state.sizeBytes)
    throw new Error(
      `chunk of ${chunk.length} bytes at ${chunk.offset} does not fit ${state.sizeBytes} bytes`,
    );
}

/** Yields `body`'s bytes and fails unless there are exactly `length` of them. */
export async function* exactly(body: Readable, length: number): AsyncGenerator<Buffer, void, undefined> {
  let seen = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    seen += chunk.length;
    if (seen > length) throw new Error(`the chunk has more than its ${length} bytes`);
    yield chunk;
  }
  if (seen !== length) throw new Error(`the chunk has ${seen} bytes, not ${length}`);
}
