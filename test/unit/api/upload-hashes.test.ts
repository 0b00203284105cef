import { createHash } from 'node:crypto';
import { createUploadHashes } from '../../../api/services/upload-hashes';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('upload hashes', () => {
  test('a kept hash goes on from where it was kept, and a failed chunk leaves it as it was', () => {
    const hashes = createUploadHashes();
    const first = hashes.resume('u', 0)!;
    first.update('abc');
    hashes.keep('u', 3, first);
    // A chunk that fails after hashing some bytes worked on a copy.
    hashes.resume('u', 3)!.update('zzz');
    const next = hashes.resume('u', 3)!;
    next.update('def');
    expect(next.digest('hex')).toBe(sha256('abcdef'));
  });

  test('an offset this process did not see has no hash; forget drops one', () => {
    const hashes = createUploadHashes();
    expect(hashes.resume('u', 5)).toBeUndefined();
    hashes.keep('u', 3, hashes.resume('u', 0)!.update('abc'));
    expect(hashes.resume('u', 6)).toBeUndefined();
    hashes.forget('u');
    expect(hashes.resume('u', 3)).toBeUndefined();
  });

  test('past its limit it drops the upload heard from longest ago', () => {
    const hashes = createUploadHashes(2);
    for (const id of ['a', 'b', 'c']) hashes.keep(id, 1, hashes.resume(id, 0)!.update('x'));
    expect(hashes.resume('a', 1)).toBeUndefined();
    expect(hashes.resume('b', 1)?.digest('hex')).toBe(sha256('x'));
    expect(hashes.resume('c', 1)?.digest('hex')).toBe(sha256('x'));
  });
});
