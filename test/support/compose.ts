import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

export interface ComposeProcess {
  /** The service's name in docker-compose.yml. */
  service: string;
  /** `api.js` or `worker.js`: the entry point under dist/cli. */
  script: string;
  replicas: number;
  /** The service's own variables (the shared connection block left out: a test wires its own). */
  environment: Record<string, string>;
  /** Every variable the service is given, shared block included. */
  variables: string[];
}

interface Service {
  command?: string[];
  environment?: Record<string, string | number>;
  deploy?: { replicas?: number };
}

/**
 * The api and worker services of docker-compose.yml, as processes to start: what
 * test/integration/cluster.test.ts runs, so that the file and the test stay in step.
 */
export function composeProcesses(): ComposeProcess[] {
  const file = path.join(__dirname, '..', '..', 'docker-compose.yml');
  const compose = parse(readFileSync(file, 'utf8'), { merge: true }) as {
    'x-service-env': Record<string, string>;
    services: Record<string, Service>;
  };
  const shared = new Set(Object.keys(compose['x-service-env']));
  return Object.entries(compose.services).flatMap(([service, definition]) => {
    const script = definition.command?.[1]?.match(/^dist\/cli\/(api|worker)\.js$/)?.[1];
    if (!script) return [];
    const variables = Object.keys(definition.environment ?? {});
    const own = Object.entries(definition.environment ?? {}).filter(([name]) => !shared.has(name));
    return [
      {
        service,
        script: `${script}.js`,
        replicas: definition.deploy?.replicas ?? 1,
        environment: Object.fromEntries(own.map(([name, value]) => [name, String(value)])),
        variables,
      },
    ];
  });
}
