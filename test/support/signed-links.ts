import { signToken } from '../../storage';

/**
 * `url` (a store link's `/stores/{token}/` or a file link's `?token=`) with its token signed
 * again an instant in the past: the link as a client holds it once its hour is up.
 */
export function expiredLink(signingSecret: string, url: string): string {
  const match = /\/stores\/([^/]+)\/|[?&]token=([^&]+)/.exec(url)!;
  const token = match[1] ?? match[2]!;
  const claims = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as {
    scope: string;
    sub: string;
  };
  const again = signToken(signingSecret, {
    scope: claims.scope,
    subject: claims.sub,
    expiresAt: new Date(Date.now() - 1000),
  });
  return url.replace(token, again);
}
