import { decompress } from 'fzstd';
import { registry } from 'zarrita';

/**
 * zarrita's own zstd codec (numcodecs.js) is Emscripten code that evaluates strings, which the
 * pages' Content-Security-Policy forbids (no `'unsafe-eval'`). fzstd is plain JavaScript and
 * reads frames with or without a declared content size (the service's streamed chunks have none).
 */
class ZstdCodec {
  kind = 'bytes_to_bytes' as const;
  static fromConfig(): ZstdCodec {
    return new ZstdCodec();
  }
  encode(): never {
    throw new Error('the web app only reads zstd chunks');
  }
  decode(bytes: Uint8Array): Uint8Array {
    return decompress(bytes);
  }
}

/** Imported for its effect: every zarrita read of this page decodes zstd with fzstd. */
registry.set('zstd', async () => ZstdCodec);
