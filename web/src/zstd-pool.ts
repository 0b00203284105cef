import type { ZstdAnswer, ZstdRequest } from './zstd-worker';

/** Decodes zstd frames. */
export type ZstdDecoder = (bytes: Uint8Array) => Promise<Uint8Array>;

interface Member {
  worker: Worker;
  waiting: Map<number, { resolve(bytes: Uint8Array): void; reject(err: Error): void }>;
}

/**
 * A few dedicated workers running fzstd, so that decoding a viewport's chunks (tens of
 * megabytes for five layers) runs beside the fetches and the drawing instead of blocking the
 * page's thread between them. Each frame goes to the member with the fewest waiting; its
 * bytes are transferred both ways. Workers start on the first frame.
 */
export function zstdPool(size: number): ZstdDecoder {
  const members: Member[] = [];
  let next = 0;
  const start = (): Member => {
    const worker = new Worker(new URL('./zstd-worker.ts', import.meta.url), { type: 'module' });
    const member: Member = { worker, waiting: new Map() };
    worker.addEventListener('message', (event: MessageEvent<ZstdAnswer>) => {
      const answer = event.data;
      const waiter = member.waiting.get(answer.id);
      member.waiting.delete(answer.id);
      if ('error' in answer) waiter?.reject(new Error(`zstd: ${answer.error}`));
      else waiter?.resolve(answer.bytes);
    });
    // A worker that cannot start or run fails what it holds, never leaves a chunk waiting.
    worker.addEventListener('error', (event) => {
      for (const waiter of member.waiting.values()) waiter.reject(new Error(`zstd worker: ${event.message}`));
      member.waiting.clear();
    });
    return member;
  };
  return (bytes) => {
    if (members.length < size) members.push(start());
    const member = members.reduce((a, b) => (b.waiting.size < a.waiting.size ? b : a));
    const id = next++;
    // Only a whole buffer can be transferred; a view into a larger one is copied out first.
    const own =
      bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
    return new Promise((resolve, reject) => {
      member.waiting.set(id, { resolve, reject });
      const request: ZstdRequest = { id, bytes: own };
      member.worker.postMessage(request, [own.buffer]);
    });
  };
}
