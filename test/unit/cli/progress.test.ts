import { createProgress } from '../../../cli/sps/output';

/** The plain lines a bar writes without a terminal, each figure once. */
function linesOf(draw: (progress: ReturnType<typeof createProgress>) => void): string[] {
  const written: string[] = [];
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    written.push(String(chunk));
    return true;
  });
  try {
    draw(createProgress(false));
  } finally {
    spy.mockRestore();
  }
  return written.join('').trimEnd().split('\n');
}

test('a fraction of 1 prints its percentage once, with its ETA and note', () => {
  const lines = linesOf((progress) => {
    const bar = progress.bar('job 1234abcd', { total: 1, bytes: false });
    bar.update(0, 'queued');
    bar.done('completed');
  });
  expect(lines).toEqual(['job 1234abcd: 0% ETA -- queued', 'job 1234abcd: 100% ETA 0s completed']);
});

test('an end that says what the last update said is not printed again', () => {
  const lines = linesOf((progress) => {
    const bar = progress.bar('job 1234abcd', { total: 1, bytes: false });
    bar.update(1, 'completed');
    bar.done('completed');
  });
  expect(lines).toEqual(['job 1234abcd: 100% ETA 0s completed']);
});

test('a count prints how many of how many', () => {
  const lines = linesOf((progress) => progress.bar('download 8 files', { total: 8, bytes: false }).done());
  expect(lines).toEqual(['download 8 files: 100% 8/8 ETA 0s done']);
});

test('bytes print the amount and the speed', () => {
  const lines = linesOf((progress) =>
    progress.bar('slide.svs', { total: 2 * 1024 * 1024, bytes: true }).done('uploaded'),
  );
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^slide\.svs: 100% 2\.0 MiB\/2\.0 MiB \S+ \S+\/s ETA \S+ uploaded$/);
});
