// The import fences of DESIGN.md's Layout, checked by dependency-cruiser (`npm run lint:imports`,
// and in `npm test`). Each room lists the rooms it may import; anything else of ours is a
// violation named after the room, so a room added later starts fenced in. Paths are resolved
// files, so the depth of a relative import (`../db`, `../../db`) does not matter.
'use strict';

const npm = ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'];

/** Matches a file inside one of `rooms` (top-level folders, or deeper ones like `cli/sps`). */
const inside = (rooms) => `^(${rooms.join('|')})/`;

/** Matches an installed package, by name (`@temporalio/worker`, `@temporalio/.+`). */
const packages = (names) => `(^|/)node_modules/(${names.join('|')})/`;

/** `room` may import only `allowed` of ours (and npm packages and Node's built-ins). */
function room(name, allowed, comment) {
  return {
    name: `${name.replace('/', '-')}-imports-only-${allowed.length === 0 ? 'itself' : allowed.join('-')}`,
    comment,
    severity: 'error',
    from: { path: inside([name]) },
    // An import that resolves to nothing is no-unresolvable's alone.
    to: {
      pathNot: [inside([name, ...allowed]), packages(['.+'])],
      dependencyTypesNot: ['core'],
      couldNotResolve: false,
    },
  };
}

/** `from` may not use `names` (npm packages) at all. */
function noPackages(name, from, names, comment) {
  return {
    name,
    comment,
    severity: 'error',
    from: { path: from },
    to: { path: packages(names), dependencyTypes: npm },
  };
}

/** `from` may not use Node's built-in modules. */
function noNode(name, from, comment, pathNot) {
  return {
    name,
    comment,
    severity: 'error',
    from: { path: from, ...(pathNot ? { pathNot } : {}) },
    to: { dependencyTypes: ['core'] },
  };
}

/** `from` may import `to` for its types only (`import type`), never its values. */
function typesOnly(name, from, to, comment) {
  return {
    name,
    comment,
    severity: 'error',
    from: { path: from },
    to: { path: to, dependencyTypesNot: ['type-only'] },
  };
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      comment:
        'Imports run one way: a module never reaches itself again through what it runs. A cycle ' +
        'closed by `import type` (an interface beside the implementations that name it) runs nothing.',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'no-unresolvable',
      comment: 'Every import names a file or package that exists (build output: once built).',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true, pathNot: '(^|/)dist/' },
    },

    room('schemas', [], 'Schemas are the single source of truth: they depend on nothing of ours.'),
    noNode('schemas-no-node', inside(['schemas']), 'Schemas run in workflows and browsers too.'),
    noPackages(
      'schemas-no-service-packages',
      inside(['schemas']),
      ['express', 'postgres', '@temporalio/.+'],
      'Schemas describe the wire, not HTTP, Temporal or the database.',
    ),

    room(
      'api',
      ['schemas', 'db', 'storage', 'models', 'workflows'],
      'The API validates, authorizes and delegates: no compute, activities or CLI.',
    ),
    typesOnly(
      'api-workflows-types-only',
      inside(['api']),
      inside(['workflows']),
      'The API starts workflows by name through the Temporal client; it never runs their code.',
    ),
    noPackages(
      'api-temporal-client-only',
      inside(['api']),
      ['@temporalio/(worker|workflow|activity|testing)'],
      'The API speaks to Temporal through its client only.',
    ),

    room(
      'workflows',
      ['schemas', 'activities'],
      'Workflows only orchestrate: schemas and the types of activities, no db, storage, compute or API.',
    ),
    typesOnly(
      'workflows-activities-types-only',
      inside(['workflows']),
      inside(['activities']),
      'Workflows call activities through proxyActivities<typeof activities>: `import type` only.',
    ),
    noNode('workflows-no-node', inside(['workflows']), 'Workflows are deterministic: no Node built-ins.'),

    room(
      'activities',
      ['compute', 'db', 'storage', 'schemas', 'models'],
      'Activities bind compute to db and storage; they know nothing of the API, workflows or CLI.',
    ),

    room('compute', [], 'Compute kernels run from a plain script: nothing of ours but their own modules.'),
    noPackages(
      'compute-no-service-packages',
      inside(['compute']),
      ['express', 'postgres', '@temporalio/.+'],
      'Compute knows nothing of HTTP, Temporal or the database.',
    ),

    room('db', ['schemas'], 'Typed queries know the schemas only.'),
    room('storage', [], 'The object store knows nothing of ours.'),
    room('models', [], 'The model registry knows nothing of ours.'),

    room(
      'cli/sps',
      ['sdk', 'schemas'],
      'The user CLI is a client: it speaks HTTP through the SDK, like any other client.',
    ),

    room(
      'sdk',
      ['schemas'],
      'The SDK is a client of the HTTP API: it shares the schemas and nothing else of ours.',
    ),
    noNode(
      'sdk-core-no-node',
      inside(['sdk']),
      'The SDK core runs in browsers: Node-only code lives under sdk/node/.',
      inside(['sdk/node']),
    ),
    {
      name: 'sdk-core-not-to-sdk-node',
      comment: 'The SDK core runs in browsers: it never reaches the Node-only code under sdk/node/.',
      severity: 'error',
      from: { path: inside(['sdk']), pathNot: inside(['sdk/node']) },
      to: { path: inside(['sdk/node']), dependencyTypesNot: ['type-only'] },
    },

    room('web', ['sdk', 'schemas'], 'The web app is a client: it speaks HTTP through the SDK.'),
    room('app', ['sdk', 'schemas'], 'The web app is a client: it speaks HTTP through the SDK.'),
  ],
  options: {
    // Packages are seen (their names matter to the rules) but not cruised.
    doNotFollow: { path: '(^|/)node_modules/' },
    exclude: { path: '^(dist|coverage|\\.data)/' },
    // A linked node_modules (a copy of the tree, a workspace) keeps its path inside the tree.
    preserveSymlinks: true,
    // `import type` counts as a dependency too, marked `type-only`, so the rules can tell it apart.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
