import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { configVariables, loadConfig, requireProductionConfig } from '../../../cli/config';
import { temporalDynamicConfig } from '../../../schemas/temporal';

/**
 * No container engine runs here, so this does what `docker compose config` would: resolve
 * anchors and `${VAR}` interpolation, check the references between services, and feed each
 * service's environment through the service's own configuration loader.
 */
const root = path.join(__dirname, '..', '..', '..');
const deployEnv: Record<string, string> = {
  POSTGRES_PASSWORD: 'pg-secret',
  MINIO_ROOT_USER: 'minio',
  MINIO_ROOT_PASSWORD: 'minio-secret',
  SIGNING_SECRET: 's'.repeat(40),
};

function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(
    /\$\$|\$\{([A-Z0-9_]+)(?::([?-])([^}]*))?\}/g,
    (all, name?: string, kind?: string, rest?: string) => {
      if (all === '$$') return '$';
      const value = env[name!];
      if (value !== undefined && value !== '') return value;
      if (kind === '-') return rest ?? '';
      throw new Error(`compose: ${name} is required (${rest})`);
    },
  );
}

type Service = {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }> | string[];
};
const load = (env: Record<string, string>) =>
  parse(interpolate(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), env), { merge: true }) as {
    services: Record<string, Service>;
    volumes: Record<string, unknown>;
  };

test('required secrets must be provided', () => {
  expect(() => load({})).toThrow(/POSTGRES_PASSWORD is required/);
});

test('every service has an image or a build, and depends only on services that exist', () => {
  const { services } = load(deployEnv);
  expect(Object.keys(services)).toEqual(
    expect.arrayContaining(['postgres', 'temporal', 'temporal-ui', 'minio', 'migrate', 'api', 'worker']),
  );
  for (const [name, service] of Object.entries(services)) {
    expect(`${name}: ${Boolean(service.image || service.build)}`).toBe(`${name}: true`);
    const dependencies = Array.isArray(service.depends_on)
      ? service.depends_on
      : Object.keys(service.depends_on ?? {});
    for (const dependency of dependencies) expect(Object.keys(services)).toContain(dependency);
  }
});

test.each(['api', 'worker', 'migrate'])('%s: its environment is a valid production configuration', (name) => {
  const service = load(deployEnv).services[name]!;
  const environment = Object.fromEntries(
    Object.entries(service.environment ?? {}).map(([k, v]) => [k, String(v)]),
  );
  for (const variable of Object.keys(environment)) expect(configVariables).toContain(variable);
  const config = loadConfig(environment);
  requireProductionConfig(config);
  expect(config.storage).toMatchObject({ backend: 's3', bucket: 'slides', endpoint: 'http://minio:9000' });
  expect(config.database.url).toBe('postgres://sps:pg-secret@postgres:5432/sps');
  expect(service.command?.[1]).toMatch(new RegExp(`^dist/cli/${name}\\.js$`));
});

test('the Temporal server gets the dynamic configuration the dev server is started with', () => {
  const compose = parse(interpolate(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), deployEnv), {
    merge: true,
  }) as {
    services: Record<
      string,
      { environment?: Record<string, string>; configs?: { source: string; target: string }[] }
    >;
    configs: Record<string, { content: string }>;
  };
  const temporal = compose.services.temporal!;
  const [mounted] = temporal.configs ?? [];
  expect(mounted?.target).toBe(`/etc/temporal/${temporal.environment?.DYNAMIC_CONFIG_FILE_PATH}`);
  const settings = parse(compose.configs[mounted!.source]!.content) as Record<string, { value: unknown }[]>;
  expect(
    Object.fromEntries(Object.entries(settings).map(([name, values]) => [name, values.map((v) => v.value)])),
  ).toEqual(
    Object.fromEntries(Object.entries(temporalDynamicConfig).map(([name, value]) => [name, [value]])),
  );
});
