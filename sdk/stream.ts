import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { JOB_STREAM_DEFAULTS, JobStreamStatusData } from '../schemas/job-stream';
import type { JobStatusBody } from '../schemas/jobs';
import { isTerminalJobStatus } from '../schemas/jobs';
import type { SpsClient } from './client';
import { isSpsError, SpsError } from './errors';
import { sleep } from './transport';

/** One status snapshot of a job (`id` is the job's); `eventId` is its per-job sequence number. */
export type JobEvent = JobStreamStatusData & { eventId: number };

export interface JobStreamOptions {
  /** Resume after this event (as `Last-Event-ID`); without it, every event of the job. */
  lastEventId?: number;
  /** No byte for this long (heartbeats included) means a dead connection (default 35 s). */
  heartbeatTimeoutMs?: number;
  /** Wait before reconnecting; the server's `retry` field otherwise (5 s). */
  reconnectDelayMs?: number;
  /** Reconnections in a row that deliver nothing before giving up (default 10). */
  maxReconnects?: number;
  signal?: AbortSignal;
}

/** Status frames are SSE `message` events, the default type (DECISIONS.md, Stream frames). */
const isStatusEvent = (message: EventSourceMessage) =>
  message.event === undefined || message.event === 'message';

/**
 * The job's events over fetch-based SSE (a bearer header, which EventSource cannot send):
 * a connection silent past the heartbeat timeout, or dropped, is reopened with
 * `Last-Event-ID`, and an event already delivered is never delivered again. Ends after the
 * server's `end` event (or a 204: nothing more will come).
 */
export async function* streamJob(
  client: SpsClient,
  jobId: string,
  options: JobStreamOptions = {},
): AsyncGenerator<JobEvent, void, undefined> {
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? JOB_STREAM_DEFAULTS.heartbeatMs * 2 + 5_000;
  const maxReconnects = options.maxReconnects ?? 10;
  let lastEventId = options.lastEventId;
  let retryMs: number = JOB_STREAM_DEFAULTS.retryMs;
  let failures = 0;

  for (;;) {
    const connection = new AbortController();
    const onAbort = () => connection.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(
        () => connection.abort(new SpsError('stream_stalled', `no heartbeat for ${heartbeatTimeoutMs} ms`)),
        heartbeatTimeoutMs,
      );
    };
    const queue: JobEvent[] = [];
    let ended = false;
    const parser = createParser({
      onRetry: (ms) => {
        retryMs = ms;
      },
      onEvent: (message) => {
        if (message.event === 'end') ended = true;
        if (!isStatusEvent(message)) return;
        const id = Number(message.id);
        if (!Number.isInteger(id) || (lastEventId !== undefined && id <= lastEventId)) return;
        const data = JobStreamStatusData.safeParse(JSON.parse(message.data));
        if (!data.success)
          throw new SpsError('invalid_response', `a stream event its schema rejects: ${message.data}`);
        lastEventId = id;
        queue.push({ ...data.data, eventId: id });
      },
    });
    try {
      arm();
      const response = await client.jobs.streamResponse(jobId, {
        signal: connection.signal,
        headers: {
          accept: 'text/event-stream',
          ...(lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) }),
        },
      });
      if (response.status === 204 || !response.body) return;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        arm();
        parser.feed(value);
        if (queue.length > 0) failures = 0;
        yield* queue.splice(0);
        if (ended) return;
      }
      if (++failures > maxReconnects) throw new SpsError('network', 'the job stream keeps closing early');
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason ?? err;
      const reason = connection.signal.aborted ? connection.signal.reason : err;
      // A refusal (not found, unauthorized) or a malformed event will not heal by reconnecting.
      const refused = isSpsError(reason) && reason.status !== null && reason.status < 500;
      if (refused || isSpsError(reason, 'invalid_response')) throw reason;
      if (++failures > maxReconnects) throw reason;
    } finally {
      clearTimeout(watchdog);
      options.signal?.removeEventListener('abort', onAbort);
      connection.abort();
    }
    await sleep(options.reconnectDelayMs ?? retryMs, options.signal);
  }
}

/** Follows the stream to the job's terminal status; answers the job as it then stands. */
export async function waitForJob(
  client: SpsClient,
  jobId: string,
  options: JobStreamOptions & { onEvent?: (event: JobEvent) => void } = {},
): Promise<JobStatusBody> {
  for await (const event of streamJob(client, jobId, options)) {
    options.onEvent?.(event);
    if (isTerminalJobStatus(event.status)) break;
  }
  return client.jobs.get(jobId, { signal: options.signal });
}
