import { type IncomingMessage, request } from 'node:http';

/** fetch with the tenant's bearer key and JSON bodies. */
export function apiClient(api: string, apiKey: string) {
  return async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const response = await fetch(`${api}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary fields of JSON answers and assert on them.
    return { status: response.status, headers: response.headers, json: json as Record<string, any>, text };
  };
}

/**
 * Sends the first `sendBytes` of a chunk that declares `declaredLength`, then drops the
 * connection: an interrupted upload, as a flaky network makes one.
 */
export function interruptedPut(
  url: string,
  contentRange: string,
  declaredLength: number,
  partial: Buffer,
): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, {
      method: 'PUT',
      headers: { 'content-range': contentRange, 'content-length': String(declaredLength) },
    });
    req.on('error', () => resolve());
    req.on('close', () => resolve());
    req.write(partial, () => setTimeout(() => req.destroy(), 200));
  });
}

/** `request` as it came (method, headers, body), sent on to `origin`: a test proxy's upstream call. */
export async function forwarded(request: IncomingMessage, origin: string): Promise<Response> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return fetch(`${origin}${request.url}`, {
    method: request.method,
    headers: Object.fromEntries(
      Object.entries(request.headers).filter(
        (entry): entry is [string, string] => typeof entry[1] === 'string' && entry[0] !== 'host',
      ),
    ),
    ...(chunks.length > 0 && { body: Buffer.concat(chunks) }),
  });
}
