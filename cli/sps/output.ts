import { MultiBar, Presets } from 'cli-progress';

export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** `1 file`, `42 files`. */
export function formatCount(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return '--';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Columns padded to their widest cell; null and undefined print as `-`. */
export function formatTable(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return '(none)';
  const columns = Object.keys(rows[0]!);
  const cell = (value: unknown) => (value === null || value === undefined ? '-' : String(value));
  const widths = columns.map((column) =>
    Math.max(column.length, ...rows.map((row) => cell(row[column]).length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((text, i) => text.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [
    line(columns.map((c) => c.toUpperCase())),
    ...rows.map((row) => line(columns.map((c) => cell(row[c])))),
  ].join('\n');
}

/** `key: value` lines, keys aligned. */
export function formatRecord(record: Record<string, unknown>): string {
  const width = Math.max(...Object.keys(record).map((key) => key.length));
  return Object.entries(record)
    .map(
      ([key, value]) =>
        `${`${key}:`.padEnd(width + 1)} ${value === null || value === undefined ? '-' : typeof value === 'object' ? JSON.stringify(value) : String(value)}`,
    )
    .join('\n');
}

export interface Bar {
  /** `value` of `total` (bytes, or a fraction of 1 with `total` 1); `note` is a status word. */
  update(value: number, note?: string): void;
  done(note?: string): void;
}

export interface Progress {
  bar(label: string, options: { total: number; bytes: boolean; startedAt?: number }): Bar;
  stop(): void;
}

interface Rate {
  text(value: number, total: number): { amount: string; speed: string; eta: string };
}

function rate(bytes: boolean, startValue: number): Rate {
  const started = performance.now();
  return {
    text(value, total) {
      const seconds = (performance.now() - started) / 1000;
      const perSecond = seconds > 0 ? (value - startValue) / seconds : 0;
      const remaining = total - value;
      const eta = perSecond > 0 ? formatSeconds(remaining / perSecond) : '--';
      // A fraction of 1 says nothing the percentage does not; a count says how many of how many.
      if (!bytes) return { amount: total === 1 ? '' : `${value}/${total}`, speed: '', eta };
      return {
        amount: `${formatBytes(value)}/${formatBytes(total)}`,
        speed: `${formatBytes(perSecond)}/s`,
        eta,
      };
    },
  };
}

/** Bars on a terminal; otherwise a plain line per bar every few seconds and at the end. */
export function createProgress(interactive: boolean): Progress {
  if (interactive) {
    const multi = new MultiBar(
      {
        hideCursor: true,
        clearOnComplete: false,
        stopOnComplete: false,
        stream: process.stderr,
        fps: 5,
      },
      Presets.shades_classic,
    );
    return {
      bar(label, { total, bytes, startedAt = 0 }) {
        const speed = rate(bytes, startedAt);
        const scale = bytes ? 1 : 1000;
        // `{eta}` is cli-progress's own token (its estimate, in bare seconds): ours is `{remaining}`.
        const figures = (value: number) => {
          const { amount, speed: perSecond, eta } = speed.text(value, total);
          return { amount, speed: perSecond, remaining: eta };
        };
        const shown = figures(startedAt);
        const segments = ['{label} [{bar}] {percentage}%', shown.amount && '{amount}', bytes && '{speed}'];
        const format = `${segments.filter(Boolean).join(' | ')} | ETA {remaining} {note}`;
        const bar = multi.create(
          Math.max(total * scale, 1),
          startedAt * scale,
          { label, note: '', ...shown },
          { format },
        );
        return {
          update: (value, note = '') => bar.update(value * scale, { note, ...figures(value) }),
          done: (note = 'done') => bar.update(total * scale, { note, ...figures(total) }),
        };
      },
      stop: () => multi.stop(),
    };
  }
  return {
    bar(label, { total, bytes, startedAt = 0 }) {
      const speed = rate(bytes, startedAt);
      let lastLine = Number.NEGATIVE_INFINITY;
      let lastNote = '';
      let printed = '';
      const print = (value: number, note: string) => {
        const { amount, speed: perSecond, eta } = speed.text(value, total);
        const percent = Math.floor((value / Math.max(total, 1)) * 100);
        const figures = [`${percent}%`, amount, perSecond, `ETA ${eta}`, note].filter(Boolean);
        const line = `${label}: ${figures.join(' ')}\n`;
        // A job's last event and its end say the same: one line for both.
        if (line !== printed) process.stderr.write(line);
        printed = line;
      };
      return {
        update(value, note = '') {
          const now = performance.now();
          if (now - lastLine < 2000 && note === lastNote) return;
          lastLine = now;
          lastNote = note;
          print(value, note);
        },
        done: (note = 'done') => print(total, note),
      };
    },
    stop: () => {},
  };
}
