import { registry } from 'zarrita';
import { zstdPool } from './zstd-pool';

/**
 * Decoders beside the page's thread: the spare cores, at least two and at most four. The page's
 * thread mostly waits while a viewport loads, so on two cores a second decoder halves the time
 * its chunks queue for one.
 */
const decode = zstdPool(Math.max(2, Math.min(4, (navigator.hardwareConcurrency || 2) - 1)));

/**
 * zarrita's own zstd codec (numcodecs.js) is Emscripten code that evaluates strings, which the
 * pages' Content-Security-Policy forbids (no `'unsafe-eval'`). fzstd is plain JavaScript and
 * reads frames with or without a declared content size (the service's streamed chunks have
 * none); it runs in a pool of workers.
 */
class ZstdCodec {
  kind = 'bytes_to_bytes' as const;
  static fromConfig(): ZstdCodec {
    return new ZstdCodec();
  }
  encode(): never {
    throw new Error('the web app only reads zstd chunks');
  }
  decode(bytes: Uint8Array): Promise<Uint8Array> {
    return decode(bytes);
  }
}

/** Imported for its effect: every zarrita read of this page decodes zstd in the pool. */
registry.set('zstd', async () => ZstdCodec);
