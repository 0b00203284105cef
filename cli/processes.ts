import { spawnSync } from 'node:child_process';

/** A process that has not ended (one ended but not yet reaped, a zombie, has), of any user. */
export function isAlive(pid: number): boolean {
  const ps = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' });
  return ps.status === 0 && !ps.stdout.trim().startsWith('Z');
}
