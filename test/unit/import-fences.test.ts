import { spawnSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/**
 * The import fences of DESIGN.md (.dependency-cruiser.cjs): each forbidden import, planted in a
 * copy of the tree, fails the check under its rule's name; each allowed one beside it passes;
 * the tree as it is passes.
 */
const root = path.join(__dirname, '..', '..');
const cruiser = path.join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruiser.mjs');
const { forbidden } = require(path.join(root, '.dependency-cruiser.cjs')) as {
  forbidden: { name: string }[];
};

interface Plant {
  file: string;
  source: string;
  /** The rule it breaks; none for an import that is allowed. */
  rule?: string;
}

const imports = (specifier: string) =>
  `import * as planted from '${specifier}';\nexport const use = planted;\n`;
const importsType = (specifier: string) =>
  `import type * as planted from '${specifier}';\nexport type Use = typeof planted;\n`;

const plants: Plant[] = [
  { file: 'storage/zz-fence-cycle-a.ts', source: imports('./zz-fence-cycle-b'), rule: 'no-cycles' },
  { file: 'storage/zz-fence-cycle-b.ts', source: imports('./zz-fence-cycle-a'), rule: 'no-cycles' },
  { file: 'storage/zz-fence-type-cycle-a.ts', source: imports('./zz-fence-type-cycle-b') },
  { file: 'storage/zz-fence-type-cycle-b.ts', source: importsType('./zz-fence-type-cycle-a') },
  { file: 'compute/zz-fence-missing.ts', source: imports('./no-such-module'), rule: 'no-unresolvable' },
  { file: 'test/zz-fence-built.ts', source: imports('../dist/sdk/not-built-yet.js') },

  { file: 'schemas/zz-fence-db.ts', source: imports('../db'), rule: 'schemas-imports-only-itself' },
  { file: 'schemas/zz-fence-node.ts', source: imports('node:path'), rule: 'schemas-no-node' },
  { file: 'schemas/zz-fence-express.ts', source: imports('express'), rule: 'schemas-no-service-packages' },
  { file: 'schemas/zz-fence-zod.ts', source: imports('zod') },

  {
    file: 'api/services/zz-fence-compute.ts',
    source: imports('../../compute/errors'),
    rule: 'api-imports-only-schemas-db-storage-models-workflows',
  },
  {
    file: 'api/zz-fence-activities.ts',
    source: imports('../activities'),
    rule: 'api-imports-only-schemas-db-storage-models-workflows',
  },
  {
    file: 'api/routes/zz-fence-cli.ts',
    source: imports('../../cli/config'),
    rule: 'api-imports-only-schemas-db-storage-models-workflows',
  },
  { file: 'api/zz-fence-workflows.ts', source: imports('../workflows'), rule: 'api-workflows-types-only' },
  { file: 'api/zz-fence-workflow-types.ts', source: importsType('../workflows') },
  { file: 'api/zz-fence-worker.ts', source: imports('@temporalio/worker'), rule: 'api-temporal-client-only' },
  { file: 'api/services/zz-fence-client.ts', source: imports('@temporalio/client') },
  { file: 'api/services/zz-fence-allowed.ts', source: imports('../../db') + imports('../../storage') },

  {
    file: 'workflows/zz-fence-db.ts',
    source: imports('../db'),
    rule: 'workflows-imports-only-schemas-activities',
  },
  {
    file: 'workflows/zz-fence-storage.ts',
    source: imports('../storage'),
    rule: 'workflows-imports-only-schemas-activities',
  },
  {
    file: 'workflows/zz-fence-compute.ts',
    source: imports('../compute/errors'),
    rule: 'workflows-imports-only-schemas-activities',
  },
  {
    file: 'workflows/zz-fence-api.ts',
    source: imports('../api/app'),
    rule: 'workflows-imports-only-schemas-activities',
  },
  {
    file: 'workflows/zz-fence-activities.ts',
    source: imports('../activities'),
    rule: 'workflows-activities-types-only',
  },
  { file: 'workflows/zz-fence-activity-types.ts', source: importsType('../activities') },
  { file: 'workflows/zz-fence-crypto.ts', source: imports('node:crypto'), rule: 'workflows-no-node' },
  { file: 'workflows/zz-fence-fs.ts', source: imports('fs'), rule: 'workflows-no-node' },
  { file: 'workflows/zz-fence-schemas.ts', source: imports('../schemas/temporal') },

  {
    file: 'activities/zz-fence/deep/api.ts',
    source: imports('../../../api/app'),
    rule: 'activities-imports-only-compute-db-storage-schemas-models',
  },
  {
    file: 'activities/zz-fence-workflows.ts',
    source: imports('../workflows'),
    rule: 'activities-imports-only-compute-db-storage-schemas-models',
  },
  { file: 'activities/zz-fence-allowed.ts', source: imports('../compute/errors') + imports('../db') },

  {
    file: 'compute/prediction/zz-fence-db.ts',
    source: imports('../../db'),
    rule: 'compute-imports-only-itself',
  },
  { file: 'compute/zz-fence-db.ts', source: imports('../db'), rule: 'compute-imports-only-itself' },
  {
    file: 'compute/zz-fence/a/b/storage.ts',
    source: imports('../../../../storage'),
    rule: 'compute-imports-only-itself',
  },
  { file: 'compute/zz-fence-postgres.ts', source: imports('postgres'), rule: 'compute-no-service-packages' },
  {
    file: 'compute/prediction/zz-fence-temporal.ts',
    source: imports('@temporalio/activity'),
    rule: 'compute-no-service-packages',
  },
  { file: 'compute/zz-fence-express.ts', source: imports('express'), rule: 'compute-no-service-packages' },
  {
    file: 'compute/zz-fence-allowed.ts',
    source: imports('node:fs') + imports('sharp') + imports('./errors'),
  },

  { file: 'db/zz-fence-storage.ts', source: imports('../storage'), rule: 'db-imports-only-schemas' },
  { file: 'db/zz-fence-schemas.ts', source: imports('../schemas/enums') },
  {
    file: 'storage/zz-fence-schemas.ts',
    source: imports('../schemas/enums'),
    rule: 'storage-imports-only-itself',
  },
  {
    file: 'models/zz-fence-schemas.ts',
    source: imports('../schemas/enums'),
    rule: 'models-imports-only-itself',
  },

  { file: 'cli/zz-fence-compute.ts', source: imports('../compute/errors') + imports('../api/app') },
  { file: 'cli/sps/zz-fence-db.ts', source: imports('../../db'), rule: 'cli-sps-imports-only-sdk-schemas' },
  {
    file: 'cli/sps/commands/zz-fence-config.ts',
    source: imports('../../config'),
    rule: 'cli-sps-imports-only-sdk-schemas',
  },
  {
    file: 'cli/sps/zz-fence-allowed.ts',
    source: imports('../../sdk/zz-fence-client') + imports('../../schemas/enums'),
  },

  { file: 'sdk/zz-fence-client.ts', source: imports('../schemas/enums') },
  { file: 'sdk/zz-fence-db.ts', source: imports('../db'), rule: 'sdk-imports-only-schemas' },
  {
    file: 'sdk/node/zz-fence-storage.ts',
    source: imports('../../storage'),
    rule: 'sdk-imports-only-schemas',
  },
  { file: 'sdk/zz-fence-fs.ts', source: imports('node:fs'), rule: 'sdk-core-no-node' },
  { file: 'sdk/node/zz-fence-fs.ts', source: imports('node:fs') + imports('../zz-fence-client') },
  { file: 'sdk/zz-fence-node.ts', source: imports('./node/zz-fence-fs'), rule: 'sdk-core-not-to-sdk-node' },
  { file: 'sdk/zz-fence-node-types.ts', source: importsType('./node/zz-fence-fs') },

  { file: 'web/src/zz-fence-db.ts', source: imports('../../db'), rule: 'web-imports-only-sdk-schemas' },
  {
    file: 'web/src/zz-fence-allowed.ts',
    source: imports('../../sdk/zz-fence-client') + imports('../../schemas/enums'),
  },
  { file: 'app/zz-fence-api.ts', source: imports('../api/app'), rule: 'app-imports-only-sdk-schemas' },

  { file: 'test/zz-fence-anything.ts', source: imports('../compute/errors') + imports('../api/app') },
];

interface Violation {
  rule: string;
  /** The importing module; for a cycle, every module on it. */
  modules: string[];
}

/**
 * Runs the check exactly as `npm test` and `npm run lint` do, in `cwd`: its exit status and the
 * violations it prints (`  error RULE: FROM → TO`, a cycle's further modules on lines below).
 */
function checkFences(cwd: string): { status: number | null; output: string; violations: Violation[] } {
  const result = spawnSync(process.execPath, [cruiser, '--config', '.dependency-cruiser.cjs', '.'], {
    cwd,
    encoding: 'utf8',
  });
  const violations: Violation[] = [];
  for (const line of result.stdout.split('\n')) {
    const head = /^\s+error (\S+): (\S+) →/.exec(line);
    const next = /^\s{6}(\S+)( →)?$/.exec(line);
    if (head) violations.push({ rule: head[1]!, modules: [head[2]!] });
    else if (next) violations.at(-1)?.modules.push(next[1]!);
  }
  return { status: result.status, output: result.stdout + result.stderr, violations };
}

/** A copy of the sources (never the checkout itself) sharing the checkout's node_modules. */
async function copyOfTree(): Promise<string> {
  const copy = await mkdtemp(path.join(os.tmpdir(), 'sps-fences-'));
  const skipped = new Set(['node_modules', 'dist', '.data', '.git', 'coverage']);
  await cp(root, copy, {
    recursive: true,
    filter: (source) =>
      !path
        .relative(root, source)
        .split(path.sep)
        .some((part) => skipped.has(part)),
  });
  await symlink(path.join(root, 'node_modules'), path.join(copy, 'node_modules'), 'dir');
  return copy;
}

let copy: string | undefined;
let planted: ReturnType<typeof checkFences>;

beforeAll(async () => {
  copy = await copyOfTree();
  for (const plant of plants) {
    const file = path.join(copy, plant.file);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, plant.source);
  }
  planted = checkFences(copy);
}, 120_000);

afterAll(async () => {
  if (copy) await rm(copy, { recursive: true, force: true });
});

test('the tree as it is keeps every fence', () => {
  const { status, output } = checkFences(root);
  expect({ status, output }).toEqual({
    status: 0,
    output: expect.stringContaining('no dependency violations'),
  });
}, 120_000);

test('every rule has a planted import that breaks it', () => {
  const broken = new Set(plants.map((plant) => plant.rule));
  expect(forbidden.map((rule) => rule.name).filter((name) => !broken.has(name))).toEqual([]);
});

test('a forbidden import fails the check', () => {
  expect(planted.violations.length).toBeGreaterThan(0);
  expect(planted.status).not.toBe(0);
});

test.each(plants.map((plant) => ({ ...plant, expected: plant.rule ?? 'allowed' })))(
  '$file: $expected',
  ({ file, rule }) => {
    const named = planted.violations.filter((violation) => violation.modules.includes(file));
    expect([...new Set(named.map((violation) => violation.rule))]).toEqual(rule ? [rule] : []);
  },
);
