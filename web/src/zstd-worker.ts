import { decompress } from 'fzstd';

/** One zstd frame in, its decoded bytes out (transferred, not copied), or the decoder's error. */
export interface ZstdRequest {
  id: number;
  bytes: Uint8Array;
}
export type ZstdAnswer = { id: number; bytes: Uint8Array } | { id: number; error: string };

addEventListener('message', (event: MessageEvent<ZstdRequest>) => {
  const { id, bytes } = event.data;
  let answer: ZstdAnswer;
  try {
    answer = { id, bytes: decompress(bytes) };
  } catch (err) {
    answer = { id, error: String(err) };
  }
  postMessage(answer, { transfer: 'bytes' in answer ? [answer.bytes.buffer] : [] });
});
