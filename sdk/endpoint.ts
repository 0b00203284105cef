import type { z } from 'zod';
import { type Endpoint, type EndpointName, endpoints } from '../schemas/endpoints';
import { SpsError } from './errors';
import type { Transport } from './transport';

type Endpoints = typeof endpoints;
type RequestOf<N extends EndpointName> = Endpoints[N] extends { request: infer R } ? R : object;
type Part<R, K extends string> = R extends { [P in K]: infer S extends z.ZodType } ? S : never;
type Field<R, K extends string, Optional extends boolean> = [Part<R, K>] extends [never]
  ? object
  : Optional extends true
    ? { [P in K]?: z.input<Part<R, K>> }
    : { [P in K]: z.input<Part<R, K>> };

/** What a call of endpoint N sends: path params, query and body as its zod schemas accept them. */
export type EndpointInput<N extends EndpointName> = Field<RequestOf<N>, 'params', false> &
  Field<RequestOf<N>, 'query', true> &
  Field<RequestOf<N>, 'body', false>;

type SchemaAt<N extends EndpointName, S extends number> = Endpoints[N]['responses'] extends {
  [P in S]: { schema: infer T extends z.ZodType };
}
  ? z.output<T>
  : never;

/** What a successful call of endpoint N answers, validated by the endpoint's response schema. */
export type EndpointOutput<N extends EndpointName> = SchemaAt<N, 200> | SchemaAt<N, 201> | SchemaAt<N, 202>;

export interface CallOptions {
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

function describe(name: EndpointName): Endpoint {
  return (endpoints as Record<EndpointName, Endpoint>)[name];
}

/** The endpoint's URL with its path parameters filled in (a splat keeps its slashes). */
export function urlOf(transport: Transport, name: EndpointName, input: { params?: object; query?: object }) {
  const endpoint = describe(name);
  const params = (input.params ?? {}) as Record<string, string>;
  const path = endpoint.path.replace(/\{(\w+)\}/g, (_, key: string) => {
    const value = String(params[key]);
    return key === endpoint.splat
      ? value.split('/').map(encodeURIComponent).join('/')
      : encodeURIComponent(value);
  });
  const url = new URL(`${endpoint.root ? transport.root : transport.api}${path}`);
  for (const [key, value] of Object.entries(input.query ?? {})) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null) url.searchParams.append(key, String(item));
    }
  }
  return url.toString();
}

/** Sends one request of endpoint N; answers the raw response (file endpoints, streams). */
export function callRaw<N extends EndpointName>(
  transport: Transport,
  name: N,
  input: EndpointInput<N>,
  options: CallOptions = {},
): Promise<Response> {
  const endpoint = describe(name);
  const body = (input as { body?: unknown }).body;
  return transport.send({
    method: endpoint.method.toUpperCase(),
    url: urlOf(transport, name, input as { params?: object; query?: object }),
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: options.signal,
    bearer: endpoint.auth === 'bearer',
  });
}

/** Checks an answer against the schema the endpoint table gives for its status. */
export async function validated<N extends EndpointName>(
  name: N,
  response: Response,
): Promise<EndpointOutput<N>> {
  const schema = describe(name).responses[response.status]?.schema;
  if (!schema) {
    throw new SpsError(
      'invalid_response',
      `${name} answered HTTP ${response.status}, which it never should`,
      {
        status: response.status,
      },
    );
  }
  const json: unknown = await response.json().catch(() => undefined);
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new SpsError(
      'invalid_response',
      `${name} answered a body its schema rejects: ${parsed.error.message}`,
      {
        status: response.status,
        cause: parsed.error,
      },
    );
  }
  return parsed.data as EndpointOutput<N>;
}

/** One typed, validated JSON call of endpoint N. */
export async function call<N extends EndpointName>(
  transport: Transport,
  name: N,
  input: EndpointInput<N>,
  options: CallOptions = {},
): Promise<EndpointOutput<N>> {
  return validated(name, await callRaw(transport, name, input, options));
}
