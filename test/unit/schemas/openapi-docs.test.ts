import { type Endpoint, type EndpointName, endpoints } from '../../../schemas/endpoints';
import { errorStatus } from '../../../schemas/errors';
import { buildOpenApiDocument } from '../../../schemas/openapi';

/** The API reference is readable: every operation explains itself and shows examples. */

interface Schema {
  $ref?: string;
  description?: string;
  properties?: Record<string, Schema>;
  enum?: string[];
}
interface MediaType {
  schema?: Schema;
  example?: unknown;
  examples?: Record<string, { value: unknown }>;
}
interface Operation {
  operationId: EndpointName;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: { name: string; in: string; description?: string; schema?: Schema }[];
  requestBody?: { content: Record<string, MediaType> };
  responses: Record<string, { description: string; content?: Record<string, MediaType> }>;
}

const document = buildOpenApiDocument('https://sps.example.com/api/v1', {
  uploadMaxBytes: 50 * 1024 ** 3,
  jsonBodyBytes: 1024 ** 2,
}) as unknown as {
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
};
const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
const table: Record<EndpointName, Endpoint> = endpoints;

function resolve(schema: Schema): Schema {
  if (!schema.$ref) return schema;
  return resolve(document.components.schemas[schema.$ref.replace('#/components/schemas/', '')]!);
}

test('the document has every endpoint of the table', () => {
  expect(operations.map((operation) => operation.operationId).sort()).toEqual(Object.keys(endpoints).sort());
});

test('every operation has a summary, a description and a tag the document describes', () => {
  const tags = new Set(document.tags.map((tag) => tag.name));
  const lacking = operations.filter(
    (operation) =>
      !operation.summary ||
      !operation.description ||
      operation.description === operation.summary ||
      operation.tags?.length !== 1 ||
      !tags.has(operation.tags[0]!),
  );
  expect(lacking.map((operation) => operation.operationId)).toEqual([]);
});

test('every JSON request body has an example that its schema accepts', () => {
  const problems: string[] = [];
  for (const operation of operations) {
    const json = operation.requestBody?.content['application/json'];
    if (!json) continue;
    const body = table[operation.operationId].request?.body;
    if (json.example === undefined) problems.push(`${operation.operationId}: no request example`);
    else if (!body?.safeParse(json.example).success)
      problems.push(`${operation.operationId}: invalid example`);
  }
  expect(problems).toEqual([]);
});

test('every operation shows a response example; each is accepted by its schema', () => {
  const problems: string[] = [];
  for (const operation of operations) {
    const endpoint = table[operation.operationId];
    const withExample = Object.entries(operation.responses).filter(([, response]) =>
      Object.values(response.content ?? {}).some((media) => media.example !== undefined || media.examples),
    );
    // Redirects and empty answers have no body to show.
    const hasBody = Object.values(operation.responses).some((response) => response.content);
    if (hasBody && withExample.length === 0) problems.push(`${operation.operationId}: no response example`);
    for (const [status, response] of Object.entries(endpoint.responses)) {
      const media = operation.responses[status]?.content ?? {};
      const isBody = response.schema && !response.codes && Number(status) < 400;
      if (isBody && Object.values(media).every((m) => m.example === undefined)) {
        problems.push(`${operation.operationId} ${status}: no example`);
      }
      if (response.example !== undefined && !response.schema?.safeParse(response.example).success) {
        problems.push(`${operation.operationId} ${status}: example not accepted by its schema`);
      }
    }
  }
  expect(problems).toEqual([]);
});

test('every error response lists the codes it can carry, each with its status and an example', () => {
  const problems: string[] = [];
  for (const operation of operations) {
    for (const [status, response] of Object.entries(operation.responses)) {
      const media = response.content?.['application/json'];
      const isError = media?.schema?.properties?.error?.enum !== undefined;
      if (Number(status) >= 400 && media && !isError)
        problems.push(`${operation.operationId} ${status}: not the error body`);
      if (!isError) continue;
      const codes = media?.schema?.properties?.error?.enum ?? [];
      if (codes.length === 0) problems.push(`${operation.operationId} ${status}: no codes`);
      for (const code of codes) {
        if (errorStatus[code as keyof typeof errorStatus] !== Number(status)) {
          problems.push(
            `${operation.operationId} ${status}: ${code} is ${errorStatus[code as keyof typeof errorStatus]}`,
          );
        }
        if (!media?.examples?.[code])
          problems.push(`${operation.operationId} ${status}: no example of ${code}`);
      }
    }
  }
  expect(problems).toEqual([]);
});

test('bearer operations list the failures every credential can meet', () => {
  const bearer = operations.filter((operation) => table[operation.operationId].auth === 'bearer');
  for (const operation of bearer) {
    const codes = (status: string) =>
      operation.responses[status]?.content?.['application/json']?.schema?.properties?.error?.enum;
    expect({ id: operation.operationId, codes: codes('401') }).toEqual({
      id: operation.operationId,
      codes: expect.arrayContaining(['unauthorized']),
    });
    expect(codes('403')).toEqual(expect.arrayContaining(['insufficient_scope']));
    expect(codes('429')).toEqual(expect.arrayContaining(['rate_limited']));
    expect(codes('503')).toEqual(expect.arrayContaining(['unavailable']));
  }
});

test('every request field and parameter says what it means', () => {
  const lacking: string[] = [];
  for (const operation of operations) {
    for (const parameter of operation.parameters ?? []) {
      if (!parameter.description && !parameter.schema?.description) {
        lacking.push(`${operation.operationId}: ${parameter.in} ${parameter.name}`);
      }
    }
    const json = operation.requestBody?.content['application/json'];
    if (!json?.schema) continue;
    for (const [name, property] of Object.entries(resolve(json.schema).properties ?? {})) {
      if (!property.description && !resolve(property).description)
        lacking.push(`${operation.operationId}: body ${name}`);
    }
  }
  expect(lacking).toEqual([]);
});
