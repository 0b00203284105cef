import { decompress } from 'fzstd';
import { registry } from 'zarrita';

/**
 * zstd decoded in plain JavaScript (fzstd) for the stores the viewer reads. numcodecs' build
 * is WebAssembly bound with embind, which makes functions from strings: the pages' CSP
 * (`script-src 'self'`, no `'unsafe-eval'`) refuses that, and the viewer only ever decodes.
 */
export function decodeZstdInScript(): void {
  registry.set('zstd', async () => ({
    kind: 'bytes_to_bytes',
    fromConfig: () => ({
      kind: 'bytes_to_bytes',
      encode(): Uint8Array {
        throw new Error('the viewer reads stores; it never encodes zstd');
      },
      decode: (bytes: Uint8Array) => decompress(bytes),
    }),
  }));
}
