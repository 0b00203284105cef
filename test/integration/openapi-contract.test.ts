import { randomUUID } from 'node:crypto';
import { startStack, type TestStack } from '../support/stack';

/**
 * The OpenAPI document the server serves, checked against the server itself: every constraint
 * the document states about a request is violated once, and the server must refuse it with
 * the status and code DECISIONS.md gives (400 `invalid_request` for a malformed or unknown
 * part, 422 `validation_failed` for an invalid body value, 404 for a malformed path id), and
 * every documented request example must pass validation.
 */

interface Schema {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  'x-equalProperties'?: string[];
  'x-errorCode'?: string;
}
interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}
interface Operation {
  operationId: string;
  security?: Record<string, string[]>[];
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema; example?: unknown }> };
  responses: Record<string, unknown>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

const methods = ['get', 'post', 'put', 'patch', 'delete'] as const;

let stack: TestStack;
let document: Document;
let root: string;

beforeAll(async () => {
  stack = await startStack();
  root = new URL(stack.api).origin;
  document = (await (await fetch(`${stack.api}/openapi.json`)).json()) as Document;
});
afterAll(async () => {
  await stack?.close();
});

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  return resolve(document.components.schemas[schema.$ref.replace('#/components/schemas/', '')]!);
}

function typesOf(schema: Schema): string[] {
  const resolved = resolve(schema);
  if (resolved.anyOf) return resolved.anyOf.flatMap(typesOf);
  if (resolved.oneOf) return resolved.oneOf.flatMap(typesOf);
  if (resolved.type === undefined) return ['any'];
  const types = ([] as string[]).concat(resolved.type);
  return types.includes('integer') ? [...types, 'number'] : types;
}

/** A value of a JSON type the schema does not allow, or undefined when it allows every type. */
function wrongType(schema: Schema): unknown {
  const allowed = typesOf(schema);
  const candidates: [string, unknown][] = [
    ['object', { nested: 1 }],
    ['boolean', true],
    ['string', 'text'],
    ['number', 12.5],
    ['array', ['x']],
  ];
  return candidates.find(([type]) => !allowed.includes(type) && !allowed.includes('any'))?.[1];
}

/** One valid value of a schema, for the branch of an exactly-one rule a violation adds. */
function validValue(schema: Schema): unknown {
  const resolved = resolve(schema);
  if (resolved.enum) return resolved.enum[0];
  if (resolved.format === 'date-time') return '2027-01-01T00:00:00Z';
  if (resolved.format === 'uuid') return randomUUID();
  return 'value';
}

interface Violation {
  name: string;
  value: unknown;
  /** The error code the server must answer with; its status follows from DECISIONS.md. */
  code: string;
}

/** Values that break one stated constraint of a schema each (and keep the JSON type where the rule is not about type). */
function violationsOf(schema: Schema, example: unknown, invalidCode: string): Violation[] {
  const resolved = resolve(schema);
  const out: Violation[] = [];
  const wrong = wrongType(resolved);
  if (wrong !== undefined) out.push({ name: 'wrong type', value: wrong, code: invalidCode });
  for (const branch of resolved.anyOf ?? []) out.push(...violationsOf(branch, example, invalidCode));
  if (resolved.enum)
    out.push({
      name: 'outside enum',
      value: resolved.enum[0] === true ? false : '__nope__',
      code: resolved['x-errorCode'] ?? invalidCode,
    });
  if (resolved.format === 'uuid') out.push({ name: 'not a uuid', value: 'not-a-uuid', code: invalidCode });
  if (resolved.format === 'date-time')
    out.push({ name: 'not a date-time', value: 'yesterday', code: invalidCode });
  if (resolved.pattern)
    out.push({ name: `pattern ${resolved.pattern}`, value: '\u0001/?', code: invalidCode });
  if (resolved.minLength !== undefined && resolved.minLength > 0) {
    out.push({ name: 'under minLength', value: 'a'.repeat(resolved.minLength - 1), code: invalidCode });
  }
  if (resolved.maxLength !== undefined) {
    out.push({ name: 'over maxLength', value: 'a'.repeat(resolved.maxLength + 1), code: invalidCode });
  }
  if (resolved.exclusiveMinimum !== undefined) {
    out.push({ name: 'at exclusiveMinimum', value: resolved.exclusiveMinimum, code: invalidCode });
  }
  if (resolved.minimum !== undefined)
    out.push({ name: 'under minimum', value: resolved.minimum - 1, code: invalidCode });
  if (resolved.maximum !== undefined) {
    out.push({
      name: 'over maximum',
      value: resolved.maximum + 1,
      code: resolved['x-errorCode'] ?? invalidCode,
    });
  }
  const item = Array.isArray(example) && example.length > 0 ? example[0] : undefined;
  if (resolved.minItems !== undefined && resolved.minItems > 0) {
    out.push({ name: 'under minItems', value: [], code: invalidCode });
  }
  if (resolved.maxItems !== undefined && item !== undefined) {
    const distinct = (index: number) =>
      typeof item === 'string' && /^[0-9a-f-]{36}$/.test(item) ? randomUUID() : `item-${index}`;
    out.push({
      name: 'over maxItems',
      value: Array.from({ length: resolved.maxItems + 1 }, (_v, index) => distinct(index)),
      code: invalidCode,
    });
  }
  if (resolved.uniqueItems && item !== undefined)
    out.push({ name: 'repeated item', value: [item, item], code: invalidCode });
  const equal = resolved['x-equalProperties'];
  if (equal) {
    out.push({
      name: `unequal ${equal.join(', ')}`,
      value: Object.fromEntries(equal.map((key, index) => [key, 0.25 * (index + 1)])),
      code: invalidCode,
    });
  }
  return out;
}

interface Call {
  method: string;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  rawBody?: string;
  bearer: boolean;
}

async function send(call: Call): Promise<{ status: number; body: Record<string, unknown> | undefined }> {
  const url = new URL(call.path.startsWith('/api/v1') ? `${root}${call.path}` : `${root}${call.path}`);
  for (const [key, value] of Object.entries(call.query ?? {})) url.searchParams.append(key, value);
  const response = await fetch(url, {
    method: call.method.toUpperCase(),
    headers: {
      ...(call.bearer ? { authorization: `Bearer ${stack.tenant.apiKey}` } : {}),
      ...(call.body !== undefined || call.rawBody !== undefined
        ? { 'content-type': 'application/json' }
        : {}),
    },
    body: call.rawBody ?? (call.body === undefined ? undefined : JSON.stringify(call.body)),
  });
  const text = await response.text();
  let body: Record<string, unknown> | undefined;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = undefined;
  }
  return { status: response.status, body };
}

function concretePath(
  template: string,
  parameters: Parameter[],
  override: Record<string, string> = {},
): string {
  return template.replace(/\{(\w+)\}/g, (_all, name: string) => {
    if (override[name] !== undefined) return override[name];
    const parameter = parameters.find((p) => p.in === 'path' && p.name === name);
    return resolve(parameter?.schema ?? {}).format === 'uuid' ? randomUUID() : 'zarr.json';
  });
}

const statusOf: Record<string, number> = {
  invalid_request: 400,
  unknown_model: 400,
  unknown_markers: 400,
  not_found: 404,
  method_not_allowed: 405,
  payload_too_large: 413,
  validation_failed: 422,
};

/** The bearer operations of the document: a signed link's or an OAuth page's rules are their own. */
function bearerOperations(): { path: string; method: string; operation: Operation }[] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([, operation]) => operation.security?.some((requirement) => 'bearer' in requirement))
      .map(([method, operation]) => ({ path, method, operation })),
  );
}

interface Case {
  operation: string;
  rule: string;
  call: Call;
  code: string;
}

function cases(): Case[] {
  const out: Case[] = [];
  for (const { path, method, operation } of bearerOperations()) {
    const parameters = operation.parameters ?? [];
    const json = operation.requestBody?.content['application/json'];
    const example = json?.example;
    const base = { method, path: concretePath(path, parameters), bearer: true };
    const withBody = json ? { body: example } : {};
    const add = (rule: string, call: Call, code: string) =>
      out.push({ operation: operation.operationId, rule, call, code });

    add('unknown query parameter', { ...base, ...withBody, query: { zzUnknown: '1' } }, 'invalid_request');
    for (const parameter of parameters.filter(
      (p) => p.in === 'path' && resolve(p.schema).format === 'uuid',
    )) {
      add(
        `path ${parameter.name} not a uuid`,
        { ...base, ...withBody, path: concretePath(path, parameters, { [parameter.name]: 'not-a-uuid' }) },
        'not_found',
      );
    }
    for (const parameter of parameters.filter((p) => p.in === 'query')) {
      for (const violation of violationsOf(parameter.schema, undefined, 'invalid_request')) {
        if (typeof violation.value !== 'string' && typeof violation.value !== 'number') continue;
        add(
          `query ${parameter.name}: ${violation.name}`,
          {
            ...base,
            ...withBody,
            query: { ...requiredQuery(parameters), [parameter.name]: String(violation.value) },
          },
          violation.code,
        );
      }
    }
    if (!json) continue;
    const schema = resolve(json.schema);
    if (operation.requestBody?.required) add('missing body', { ...base }, 'invalid_request');
    add('body not an object', { ...base, body: [example] }, 'invalid_request');
    add('malformed JSON', { ...base, rawBody: '{"a":' }, 'invalid_request');
    if (schema.additionalProperties === false)
      add('unknown property', { ...base, body: { ...(example as object), zzUnknown: 1 } }, 'invalid_request');
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      const exampleValue = (example as Record<string, unknown>)[name];
      for (const violation of violationsOf(property, exampleValue, 'validation_failed')) {
        add(
          `body ${name}: ${violation.name}`,
          { ...base, body: { ...(example as object), [name]: violation.value } },
          violation.code,
        );
      }
    }
    if (schema.oneOf) {
      const keys = schema.oneOf.flatMap((branch) => branch.required ?? []);
      const neither = Object.fromEntries(
        Object.entries(example as object).filter(([key]) => !keys.includes(key)),
      );
      add('oneOf: no branch', { ...base, body: neither }, 'validation_failed');
      const both = { ...(example as object) };
      for (const key of keys) both[key as keyof typeof both] = validValue(schema.properties![key]!) as never;
      add('oneOf: several branches', { ...base, body: both }, 'validation_failed');
    }
    for (const key of schema.required ?? []) {
      const { [key]: _dropped, ...rest } = example as Record<string, unknown>;
      add(`body ${key} missing`, { ...base, body: rest }, 'validation_failed');
    }
  }
  return out;
}

function requiredQuery(parameters: Parameter[]): Record<string, string> {
  return Object.fromEntries(
    parameters
      .filter((p) => p.in === 'query' && p.required)
      .map((p) => [p.name, String(validValue(p.schema))]),
  );
}

test('the document states a rule for every request part the server validates', () => {
  const operations = bearerOperations();
  expect(operations.length).toBeGreaterThan(25);
  for (const { operation } of operations) {
    const json = operation.requestBody?.content['application/json'];
    if (json) {
      expect({ operation: operation.operationId, required: operation.requestBody?.required }).toEqual({
        operation: operation.operationId,
        required: true,
      });
      expect({ operation: operation.operationId, example: json.example !== undefined }).toEqual({
        operation: operation.operationId,
        example: true,
      });
    }
  }
  const rules = cases().map((c) => `${c.operation}: ${c.rule}`);
  // The rules this test exists for must be among those it derived from the document.
  expect(rules).toEqual(
    expect.arrayContaining([
      'createUpload: missing body',
      'createUpload: body fileSize: over maximum',
      'createUpload: body mpp: unequal x, y',
      'patchSample: body mpp: unequal x, y',
      'predict: body markers: repeated item',
      'setExpiration: oneOf: no branch',
      'setExpiration: oneOf: several branches',
      'bulkExpiration: oneOf: several branches',
      'predict: unknown property',
      'getJob: path id not a uuid',
      'listSamples: query scope: outside enum',
    ]),
  );
});

test('the server refuses every violation of a documented rule with the code DECISIONS.md gives', async () => {
  const mismatches: string[] = [];
  for (const c of cases()) {
    const { status, body } = await send(c.call);
    const expected = statusOf[c.code];
    if (status !== expected || body?.error !== c.code) {
      mismatches.push(
        `${c.operation}: ${c.rule}: ${status} ${String(body?.error)} (expected ${expected} ${c.code})`,
      );
    }
  }
  expect(mismatches).toEqual([]);
});

test('every documented request example passes validation', async () => {
  const refused: string[] = [];
  for (const { path, method, operation } of bearerOperations()) {
    const json = operation.requestBody?.content['application/json'];
    if (!json) continue;
    const parameters = operation.parameters ?? [];
    const { status, body } = await send({
      method,
      path: concretePath(path, parameters),
      body: json.example,
      query: requiredQuery(parameters),
      bearer: true,
    });
    if (body?.error === 'invalid_request' || body?.error === 'validation_failed') {
      refused.push(`${operation.operationId}: ${status} ${String(body.message)}`);
    }
  }
  expect(refused).toEqual([]);
});

test('a method a known path does not declare is 405 with Allow listing the declared ones', async () => {
  const templates = Object.keys(document.paths);
  const matcherOf = (template: string) =>
    new RegExp(
      `^${template.replace(/[.]/g, '\\.').replace(/\{(\w+)\}/g, (_all, name: string) => (name === 'path' || name === 'key' ? '.+' : '[^/]+'))}$`,
    );
  const mismatches: string[] = [];
  for (const template of templates) {
    const path = concretePath(
      template,
      Object.values(document.paths[template]!).flatMap((operation) => operation.parameters ?? []),
    );
    // The templates the concrete path matches with the fewest parameters lend their methods
    // (`/samples/trash` is that path, not a `/samples/{id}`).
    const matching = templates.filter((other) => matcherOf(other).test(path));
    const parametersOf = (other: string) => other.match(/\{\w+\}/g)?.length ?? 0;
    const fewest = Math.min(...matching.map(parametersOf));
    const declared = new Set(
      matching
        .filter((other) => parametersOf(other) === fewest)
        .flatMap((other) => Object.keys(document.paths[other]!)),
    );
    for (const method of methods.filter((m) => !declared.has(m))) {
      const response = await fetch(`${root}${path}`, { method: method.toUpperCase() });
      const allow = (response.headers.get('allow') ?? '')
        .split(', ')
        .map((m) => m.toLowerCase())
        .filter((m) => methods.includes(m as never));
      const body = (await response.json().catch(() => undefined)) as { error?: string } | undefined;
      if (
        response.status !== 405 ||
        body?.error !== 'method_not_allowed' ||
        allow.sort().join() !== [...declared].sort().join()
      ) {
        mismatches.push(
          `${method.toUpperCase()} ${path}: ${response.status} ${body?.error} Allow ${response.headers.get('allow')}`,
        );
      }
    }
  }
  expect(mismatches).toEqual([]);
  const options = await fetch(`${stack.api}/jobs/${randomUUID()}`, { method: 'OPTIONS' });
  expect(options.status).toBe(204);
  expect(options.headers.get('allow')).toBe('GET, HEAD, OPTIONS');
});

test('the API reference is served with every asset it references from the service itself', async () => {
  const page = await fetch(`${stack.api}/docs`);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  const policy = page.headers.get('content-security-policy') ?? '';
  expect(policy).toContain("script-src 'self'");
  expect(policy).toContain("connect-src 'self'");
  expect(policy).not.toMatch(/https?:/);
  const html = await page.text();
  const references = [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((match) => match[1]!);
  expect(references.length).toBeGreaterThanOrEqual(3);
  for (const reference of references) {
    const url = new URL(reference, `${stack.api}/docs`);
    expect({ reference, origin: url.origin }).toEqual({ reference, origin: root });
    const asset = await fetch(url);
    expect({ reference, status: asset.status }).toEqual({ reference, status: 200 });
    expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(0);
  }
  // The page's starter script loads the document this server serves, by a relative URL.
  const start = await (await fetch(`${stack.api}/docs/start.js`)).text();
  expect(start).toContain("url: 'openapi.json'");
  expect(start).toContain('validatorUrl: null');
  expect((await fetch(`${stack.api}/docs/index.html`)).status).toBe(404);
});
