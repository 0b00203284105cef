/** Seconds of CPU this process (every thread of it) has used. */
export function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}
