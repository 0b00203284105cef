import { execFile } from 'node:child_process';

/**
 * The interpreter of the test virtual environment (zarr, ome-zarr, jsonschema, tifffile, ...)
 * that `npm test` creates. Tests that need it fail, never skip, when it is missing: a checker
 * that silently does not run checks nothing.
 */
export function testPython(): string {
  const python = process.env.SPS_TEST_PYTHON;
  if (!python) {
    throw new Error(
      'SPS_TEST_PYTHON is unset: run the suite with `npm test` (scripts/bootstrap.js creates the ' +
        'Python environment), or set it to the python of a venv made from ' +
        'test/support/python-requirements.txt, e.g. SPS_TEST_PYTHON=~/.cache/sps/venv/bin/python',
    );
  }
  return python;
}

/**
 * Runs a Python snippet with `args` as `sys.argv[1:]` (and `env` over this process's
 * environment) in `python` (the test venv's by default); resolves its stdout.
 */
export function runPython(
  script: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
  python: string = testPython(),
): Promise<string> {
  return new Promise((resolve, reject) => {
    const options = { maxBuffer: 256 << 20, env: { ...process.env, ...env } };
    execFile(python, ['-c', script, ...args], options, (err, stdout) => {
      // The message already ends with stderr (the traceback).
      if (err) reject(new Error(`python failed: ${err.message}`));
      else resolve(stdout);
    });
  });
}

/** Runs a Python snippet that prints one JSON document; resolves it parsed. */
export async function runPythonJson<T>(
  script: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
  python: string = testPython(),
): Promise<T> {
  const out = await runPython(script, args, env, python);
  try {
    return JSON.parse(out) as T;
  } catch {
    throw new Error(`python printed no JSON:\n${out}`);
  }
}

/**
 * The interpreter of the SpatialData venv (test/support/python-spatialdata-requirements.txt:
 * spatialdata's dask pin rules out the main venv's ome-zarr). Fails, never skips, when unset.
 */
export function spatialDataPython(): string {
  const python = process.env.SPS_TEST_SPATIALDATA_PYTHON;
  if (!python) {
    throw new Error(
      'SPS_TEST_SPATIALDATA_PYTHON is unset: run the suite with `npm test` (scripts/bootstrap.js ' +
        'creates the environment), or set it to the python of a venv made from ' +
        'test/support/python-spatialdata-requirements.txt, e.g. ~/.cache/sps/venv-spatialdata/bin/python',
    );
  }
  return python;
}
