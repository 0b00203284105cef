import { Gauge, type Registry } from 'prom-client';
import type { Sql } from '../../db';
import { findOwnedJobStatus, type JobEvent, type JobEventHub, listJobEventsAfter } from '../../db/job-events';
import type { JobStreamFrame } from '../../schemas/job-stream';
import { isTerminalJobStatus } from '../../schemas/jobs';
import type { Principal } from '../auth';
import { AppError, notFound } from '../errors';

/** Where a stream's frames go: the route writes them as SSE on the response. */
export interface JobStreamSink {
  send(frame: JobStreamFrame): void;
  /** The stream is over (after `end`): close the response. */
  close(): void;
}

export interface OpenJobStream {
  /** Starts delivery; the returned function stops it (client gone). Call at most once. */
  start(sink: JobStreamSink): () => void;
}

export interface JobStreamServiceDeps {
  sql: Sql;
  hub: JobEventHub;
  heartbeatMs: number;
}

export type JobStreamService = ReturnType<typeof createJobStreamService>;

// The hub hands one event object to every stream of its job: one frame for all of them lets
// the route format it once (2,000 streams on a job, one JSON.stringify).
const framesOfEvents = new WeakMap<JobEvent, JobStreamFrame>();
function statusFrame(jobId: string, event: JobEvent): JobStreamFrame {
  let frame = framesOfEvents.get(event);
  if (!frame) {
    const { status, progress, resultStoragePath } = event;
    const data = { id: jobId, status, progress, resultStoragePath, resultGcsPath: resultStoragePath };
    frame = { event: 'message', id: event.seq, data };
    framesOfEvents.set(event, frame);
  }
  return frame;
}

/**
 * A job's status stream: the events after `Last-Event-ID` (all of them without one), then live
 * ones, a heartbeat carrying the last id, and `end` after the terminal status.
 */
export function createJobStreamService(deps: JobStreamServiceDeps) {
  const { sql, hub, heartbeatMs } = deps;

  /**
   * Authorizes and decides, before any SSE header: another organization's job is 404, and a
   * resumption at or past the terminal event is `undefined` (nothing will ever follow, so the
   * route answers 204, which tells EventSource to stop reconnecting).
   */
  async function open(
    principal: Principal,
    jobId: string,
    lastEventId: number | undefined,
  ): Promise<OpenJobStream | undefined> {
    const status = await findOwnedJobStatus(sql, principal.organizationId, jobId);
    if (status === undefined) throw notFound('job');
    // The terminal event commits with the terminal status, so a terminal status read here
    // means the replay below contains every event there will ever be.
    const terminal = isTerminalJobStatus(status);
    if (terminal && lastEventId !== undefined) {
      const after = await listJobEventsAfter(sql, jobId, lastEventId, 1);
      if (after.length === 0) return undefined;
    }
    return { start: (sink) => run(sink, jobId, lastEventId ?? 0, terminal) };
  }

  function run(sink: JobStreamSink, jobId: string, afterSeq: number, terminalAtStart: boolean): () => void {
    let lastId = afterSeq;
    let stopped = false;
    const finish = () => {
      if (stopped) return;
      sink.send({ event: 'end', id: lastId });
      stop();
      sink.close();
    };
    const subscription = hub.subscribe(jobId, afterSeq, {
      onEvent(event: JobEvent) {
        if (stopped) return;
        lastId = event.seq;
        sink.send(statusFrame(jobId, event));
        if (isTerminalJobStatus(event.status)) finish();
      },
      // A job that was terminal when the stream opened but whose replay held no terminal
      // event (its events predate event recording) still ends.
      onCaughtUp() {
        if (terminalAtStart) finish();
      },
    });
    const heartbeat = setInterval(() => sink.send({ event: 'heartbeat', id: lastId }), heartbeatMs);
    heartbeat.unref();
    function stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(heartbeat);
      subscription.close();
    }
    return stop;
  }

  return { open };
}

/**
 * Open streams per credential in this process. A stream costs one rate token when it opens and
 * then holds a connection and a subscription for as long as the client likes: without a cap,
 * one key could hold thousands. Past the cap a new stream is 429 until one closes.
 */
export function createStreamQuota(maxPerCredential: number) {
  const open = new Map<string, number>();
  return {
    /** Takes a slot of the credential or throws 429; `release` gives it back, at most once. */
    take(credentialId: string): { release(): void } {
      const count = open.get(credentialId) ?? 0;
      if (count >= maxPerCredential) {
        throw new AppError(
          'rate_limited',
          `this credential already has ${maxPerCredential} open job streams; close one first`,
          { retryAfterSeconds: STREAM_SLOT_RETRY_SECONDS },
        );
      }
      open.set(credentialId, count + 1);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          const left = (open.get(credentialId) ?? 1) - 1;
          if (left === 0) open.delete(credentialId);
          else open.set(credentialId, left);
        },
      };
    },
  };
}

/** When a client refused a stream slot may try again: a slot frees when any stream closes. */
const STREAM_SLOT_RETRY_SECONDS = 5;

export type StreamQuota = ReturnType<typeof createStreamQuota>;

/** Open streams and the jobs they follow, read from the hub at each scrape. */
export function registerJobStreamMetrics(registry: Registry, hub: JobEventHub): void {
  new Gauge({
    name: 'job_streams_open',
    help: 'Open job status streams (SSE) of this process',
    registers: [registry],
    collect() {
      this.set(hub.stats().subscriptions);
    },
  });
  new Gauge({
    name: 'job_streams_jobs',
    help: 'Jobs followed by at least one open stream of this process',
    registers: [registry],
    collect() {
      this.set(hub.stats().jobs);
    },
  });
}
