import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';

/** Bundles of other sources kept in the cache (the newest). */
const BUNDLES_KEPT = 12;

/**
 * Bundles the workflow code once per run (webpack takes seconds) into a file every test worker
 * reads, named by TEST_WORKFLOW_BUNDLE; a bundle already named there is kept. Under `npm test`,
 * SPS_SOURCE_DIGEST (scripts/bootstrap.js: every file of the checkout) keys a cached bundle in
 * ~/.cache/sps/workflow-bundles, made once per digest.
 */
export async function ensureWorkflowBundle(): Promise<void> {
  const named = process.env.TEST_WORKFLOW_BUNDLE;
  if (named && existsSync(named)) return;
  const digest = process.env.SPS_SOURCE_DIGEST;
  const cacheDir = path.join(
    process.env.SPS_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'sps'),
    'workflow-bundles',
  );
  const cached = digest && /^[0-9a-f]{64}$/.test(digest) ? path.join(cacheDir, `${digest}.js`) : undefined;
  const scratch = process.env.SPS_TEST_SCRATCH ?? (await mkdtemp(path.join(os.tmpdir(), 'sps-workflows-')));
  const file = path.join(scratch, 'workflow-bundle.js');
  // Copied into the run's scratch folder: another run may prune the cache meanwhile.
  if (cached && existsSync(cached)) await copyFile(cached, file);
  else {
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('../../workflows'),
      logger: new DefaultLogger('WARN'),
    });
    await writeFile(file, code);
    if (cached) await cacheBundle(code, cached);
  }
  process.env.TEST_WORKFLOW_BUNDLE = file;
}

async function cacheBundle(code: string, cached: string): Promise<void> {
  const dir = path.dirname(cached);
  await mkdir(dir, { recursive: true });
  // Written beside, then renamed: a concurrent run never reads half a bundle.
  const partial = `${cached}.${process.pid}.partial`;
  await writeFile(partial, code);
  await rename(partial, cached);
  await pruneBundles(dir);
}

async function pruneBundles(dir: string): Promise<void> {
  const bundles = await Promise.all(
    (await readdir(dir))
      .filter((name) => /^[0-9a-f]{64}\.js$/.test(name))
      .map(async (name) => ({ name, mtime: (await stat(path.join(dir, name))).mtimeMs })),
  );
  bundles.sort((a, b) => b.mtime - a.mtime);
  for (const old of bundles.slice(BUNDLES_KEPT)) await rm(path.join(dir, old.name), { force: true });
}
