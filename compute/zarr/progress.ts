/**
 * Progress and resume token of a writer that stores shards one task at a time in a fixed order
 * (plain JSON, for heartbeat details): `done` tasks of `total`. `layout` names everything the
 * bytes depend on, so a token of another layout is not trusted.
 */
export interface ShardTaskProgress {
  version: 1;
  layout: string;
  done: number;
  total: number;
}

/** The task to start at: the token's `done` when it belongs to this layout and task count, else 0. */
export function resumePoint(
  resume: ShardTaskProgress | null | undefined,
  layout: string,
  total: number,
): number {
  return resume?.version === 1 &&
    resume.layout === layout &&
    resume.total === total &&
    Number.isSafeInteger(resume.done) &&
    resume.done >= 0 &&
    resume.done <= total
    ? resume.done
    : 0;
}
