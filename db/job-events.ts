import type { JobStatus } from '../schemas/enums';
import type { Queryable, Sql, TransactionSql } from './index';

/** One row of `job_events`: a status or progress change; `seq` is the job stream's event id. */
export interface JobEvent {
  seq: number;
  status: JobStatus;
  progress: number | null;
  resultStoragePath: string | null;
}

export interface NewJobEvent {
  jobId: string;
  status: JobStatus;
  progress: number | null;
  resultStoragePath: string | null;
}

/** The channel of the `job_events_notify` trigger (migration 0001); its payload is `{jobId, seq}`. */
export const JOB_EVENTS_CHANNEL = 'job_events';

/**
 * Appends an event with the job's next sequence number; the insert fires the NOTIFY trigger,
 * delivered when the transaction commits. The job row is locked first (NO KEY UPDATE, so
 * foreign-key checks of other rows are not blocked) and the number is read by a second
 * statement: under READ COMMITTED that statement sees every event committed by whoever held
 * the lock before, so numbers neither collide nor skip, and they commit in order.
 */
export async function appendJobEvent(tx: TransactionSql, event: NewJobEvent): Promise<{ seq: number }> {
  const [job] = await tx`SELECT 1 FROM jobs WHERE id = ${event.jobId} FOR NO KEY UPDATE`;
  if (!job) throw new Error(`job ${event.jobId} not found`);
  const [row] = await tx<{ seq: number }[]>`
    INSERT INTO job_events (job_id, seq, status, progress, result_storage_path)
    SELECT ${event.jobId}, coalesce(max(seq), 0) + 1, ${event.status}, ${event.progress}, ${event.resultStoragePath}
    FROM job_events WHERE job_id = ${event.jobId}
    RETURNING seq`;
  return { seq: row!.seq };
}

const eventColumns = (sql: Queryable) =>
  sql`e.seq, e.status, e.progress, e.result_storage_path AS "resultStoragePath"`;

/** Events of one job after `afterSeq`, oldest first. */
export async function listJobEventsAfter(
  sql: Queryable,
  jobId: string,
  afterSeq: number,
  limit = 1000,
): Promise<JobEvent[]> {
  return sql<JobEvent[]>`
    SELECT ${eventColumns(sql)} FROM job_events e
    WHERE e.job_id = ${jobId} AND e.seq > ${afterSeq} ORDER BY e.seq LIMIT ${limit}`;
}

/**
 * Events of many jobs, each after its own seq and at most `limitPerJob` of each, in one round
 * trip: a notification burst over thousands of streamed jobs costs a few queries, not one each.
 */
export async function listJobEventsAfterMany(
  sql: Queryable,
  cursors: readonly { jobId: string; afterSeq: number }[],
  limitPerJob: number,
): Promise<(JobEvent & { jobId: string })[]> {
  if (cursors.length === 0) return [];
  return sql<(JobEvent & { jobId: string })[]>`
    SELECT c."jobId", ${eventColumns(sql)}
    FROM jsonb_to_recordset(${sql.json(cursors.map(({ jobId, afterSeq }) => ({ jobId, afterSeq })))}) AS c("jobId" uuid, "afterSeq" integer)
    CROSS JOIN LATERAL (
      SELECT seq, status, progress, result_storage_path FROM job_events
      WHERE job_id = c."jobId" AND seq > c."afterSeq" ORDER BY seq LIMIT ${limitPerJob}
    ) e
    ORDER BY c."jobId", e.seq`;
}

/** The job's status when it belongs to the organization (a stream's authorization). */
export async function findOwnedJobStatus(
  sql: Queryable,
  organizationId: string,
  jobId: string,
): Promise<JobStatus | undefined> {
  const [row] = await sql<{ status: JobStatus }[]>`
    SELECT status FROM jobs WHERE organization_id = ${organizationId} AND id = ${jobId}`;
  return row?.status;
}

export interface JobEventHandlers {
  /** Each event after the subscriber's last seq, once, in seq order. */
  onEvent(event: JobEvent): void;
  /**
   * The subscriber has been given every event committed before it subscribed (its replay is
   * over). Called after each read that leaves it caught up.
   */
  onCaughtUp?(): void;
}

export interface JobEventSubscription {
  /** The seq of the last event delivered (or the one the subscription started after). */
  readonly lastSeq: number;
  close(): void;
}

export interface JobEventHub {
  /**
   * Delivers the job's events after `afterSeq`: first those already stored, then new ones as
   * they commit, without gap or repeat. Synchronous: nothing is delivered before it returns.
   */
  subscribe(jobId: string, afterSeq: number, handlers: JobEventHandlers): JobEventSubscription;
  /** Resolves once LISTEN is active (it starts with the first subscription, or here). */
  ready(): Promise<void>;
  /** Open subscriptions, jobs with subscribers, and whether LISTEN is active. */
  stats(): { subscriptions: number; jobs: number; listening: boolean };
}

interface Subscriber extends JobEventSubscription {
  lastSeq: number;
  /** The number of the newest read started when it subscribed (see `deliver`). */
  readonly joinedDuringRead: number;
  readonly handlers: JobEventHandlers;
}

interface JobChannel {
  jobId: string;
  subscribers: Set<Subscriber>;
}

/** Rows per job and jobs per query in one read: bounded memory whatever the backlog. */
const EVENTS_PER_JOB_PER_READ = 200;
const JOBS_PER_QUERY = 200;
const RETRY_AFTER_ERROR_MS = 1000;

function parseNotification(payload: string): { jobId: string; seq: number } | undefined {
  try {
    const value: unknown = JSON.parse(payload);
    if (typeof value !== 'object' || value === null) return undefined;
    const { jobId, seq } = value as { jobId?: unknown; seq?: unknown };
    return typeof jobId === 'string' && typeof seq === 'number' ? { jobId, seq } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The one LISTEN of an API process, fanned out to its streams by job id: 2,000 streams hold
 * one database connection (postgres.js keeps a single listening connection per pool), not
 * 2,000.
 *
 * A notification only says "job J has events up to seq N"; the events themselves are always
 * read from `job_events` after each subscriber's last seq. So a lost notification, a duplicate,
 * or one that arrives while a subscriber is still replaying cannot cause a gap or a repeat.
 * When the listening connection drops, postgres.js reconnects (with backoff, also after a
 * LISTEN that failed because the database was down) and LISTENs again; its `onlisten` then
 * makes every job read what committed meanwhile. All reads go through one loop per hub, so a
 * job's events reach each subscriber in order, and one query serves every job that is due.
 */
export function createJobEventHub(sql: Sql, options: { onError?: (err: unknown) => void } = {}): JobEventHub {
  const channels = new Map<string, JobChannel>();
  const due = new Set<JobChannel>();
  let listenStarted = false;
  let listenActive = false;
  const onActive: (() => void)[] = [];
  let reading = false;
  let readsStarted = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  const report = (err: unknown) => options.onError?.(err);

  function onNotify(payload: string): void {
    const note = parseNotification(payload);
    if (!note) return;
    const channel = channels.get(note.jobId);
    if (!channel) return;
    for (const subscriber of channel.subscribers) {
      if (subscriber.lastSeq < note.seq) {
        markDue(channel);
        return;
      }
    }
  }

  // After the first LISTEN and after every re-LISTEN that follows a lost connection: whatever
  // committed while nobody listened is read now.
  function onListen(): void {
    listenActive = true;
    for (const resolve of onActive.splice(0)) resolve();
    for (const channel of channels.values()) markDue(channel);
  }

  // Called once: postgres.js re-LISTENs by itself, and a second call would register a second
  // listener (every notification twice) rather than replace the first.
  function startListening(): void {
    if (listenStarted) return;
    listenStarted = true;
    sql.listen(JOB_EVENTS_CHANNEL, onNotify, onListen).catch(report);
  }

  function ready(): Promise<void> {
    startListening();
    if (listenActive) return Promise.resolve();
    return new Promise((resolve) => onActive.push(resolve));
  }

  function markDue(channel: JobChannel): void {
    due.add(channel);
    startListening();
    // Before LISTEN is active a read could miss an event that commits just after it, with no
    // notification to follow; onListen marks every job again once it is.
    if (listenActive && !reading && retryTimer === undefined) void readDue();
  }

  function retryLater(): void {
    if (retryTimer !== undefined) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (listenActive && !reading && due.size > 0) void readDue();
    }, RETRY_AFTER_ERROR_MS);
    retryTimer.unref();
  }

  async function readDue(): Promise<void> {
    reading = true;
    try {
      while (due.size > 0) {
        const batch: { channel: JobChannel; afterSeq: number }[] = [];
        for (const channel of due) {
          due.delete(channel);
          if (channel.subscribers.size === 0) continue;
          let afterSeq = Number.POSITIVE_INFINITY;
          for (const subscriber of channel.subscribers) afterSeq = Math.min(afterSeq, subscriber.lastSeq);
          batch.push({ channel, afterSeq });
          if (batch.length === JOBS_PER_QUERY) break;
        }
        if (batch.length === 0) continue;
        const read = ++readsStarted;
        let rows: (JobEvent & { jobId: string })[];
        try {
          rows = await listJobEventsAfterMany(
            sql,
            batch.map(({ channel, afterSeq }) => ({ jobId: channel.jobId, afterSeq })),
            EVENTS_PER_JOB_PER_READ,
          );
        } catch (err) {
          for (const { channel } of batch) due.add(channel);
          report(err);
          retryLater();
          return;
        }
        const byJob = new Map<string, JobEvent[]>();
        for (const { jobId, ...event } of rows) {
          const events = byJob.get(jobId);
          if (events) events.push(event);
          else byJob.set(jobId, [event]);
        }
        for (const { channel, afterSeq } of batch) {
          deliver(channel, afterSeq, read, byJob.get(channel.jobId) ?? []);
        }
      }
    } finally {
      reading = false;
    }
  }

  function deliver(channel: JobChannel, afterSeq: number, read: number, events: JobEvent[]): void {
    const complete = events.length < EVENTS_PER_JOB_PER_READ;
    if (!complete) due.add(channel);
    for (const subscriber of [...channel.subscribers]) {
      // One who subscribed while the query ran may be further behind than it read: it is due
      // again and is served from its own seq next time.
      if (subscriber.lastSeq < afterSeq) continue;
      try {
        for (const event of events) {
          if (!channel.subscribers.has(subscriber)) break;
          if (event.seq <= subscriber.lastSeq) continue;
          subscriber.lastSeq = event.seq;
          subscriber.handlers.onEvent(event);
        }
        // The query's snapshot may predate a subscription made while it ran, so only older
        // subscribers are known to have everything committed before they subscribed.
        if (complete && subscriber.joinedDuringRead < read && channel.subscribers.has(subscriber)) {
          subscriber.handlers.onCaughtUp?.();
        }
      } catch (err) {
        report(err);
        subscriber.close();
      }
    }
  }

  function subscribe(jobId: string, afterSeq: number, handlers: JobEventHandlers): JobEventSubscription {
    let channel = channels.get(jobId);
    if (!channel) {
      channel = { jobId, subscribers: new Set() };
      channels.set(jobId, channel);
    }
    const owner = channel;
    const subscriber: Subscriber = {
      lastSeq: afterSeq,
      joinedDuringRead: readsStarted,
      handlers,
      close() {
        owner.subscribers.delete(subscriber);
        if (owner.subscribers.size === 0 && channels.get(jobId) === owner) {
          channels.delete(jobId);
          due.delete(owner);
        }
      },
    };
    channel.subscribers.add(subscriber);
    markDue(channel);
    return subscriber;
  }

  function stats() {
    let subscriptions = 0;
    for (const channel of channels.values()) subscriptions += channel.subscribers.size;
    return { subscriptions, jobs: channels.size, listening: listenActive };
  }

  return { subscribe, ready, stats };
}
