import { type Response, Router } from 'express';
import { endpoints } from '../../schemas/endpoints';
import type { JobStreamFrame } from '../../schemas/job-stream';
import { principalOf } from '../auth';
import { mount } from '../route';
import type { JobStreamService, JobStreamSink, StreamQuota } from '../services/job-stream';

/**
 * A client this far behind is not reading: drop it rather than buffer without bound. It
 * reconnects with Last-Event-ID and misses nothing.
 */
const MAX_BUFFERED_BYTES = 1024 * 1024;

const formattedStatusFrames = new WeakMap<JobStreamFrame, string>();

/** One SSE frame (WHATWG HTML, Server-sent events); `retry` rides on status frames. */
export function formatFrame(frame: JobStreamFrame, retryMs: number): string {
  if (frame.event === 'message') {
    // The same frame object goes to every stream of a job (see the service): format it once.
    let text = formattedStatusFrames.get(frame);
    if (text === undefined) {
      text = `event: message\nid: ${frame.id}\nretry: ${retryMs}\ndata: ${JSON.stringify(frame.data)}\n\n`;
      formattedStatusFrames.set(frame, text);
    }
    return text;
  }
  // EventSource dispatches no event whose data is empty, so heartbeat and end carry `{}`.
  return `event: ${frame.event}\nid: ${frame.id}\ndata: {}\n\n`;
}

/** Writes frames as SSE; `stop` also runs if the client turns out to be gone when writing. */
function sseSink(res: Response, retryMs: number, stop: () => void): JobStreamSink {
  return {
    send(frame) {
      if (res.destroyed) return stop();
      res.write(formatFrame(frame, retryMs));
      if (res.writableLength > MAX_BUFFERED_BYTES) res.destroy();
    },
    close() {
      res.end();
    },
  };
}

export function jobStreamRoutes(
  streams: JobStreamService,
  settings: { retryMs: number; quota: StreamQuota },
): Router {
  const router = Router();
  mount(router, endpoints.streamJob, async ({ params, headers }, req, res) => {
    const principal = principalOf(res.locals);
    // The slot is held until the response closes, whichever way it ends (204, error, client gone).
    const slot = settings.quota.take(principal.credentialId);
    res.on('close', () => slot.release());
    const stream = await streams.open(principal, params.id, headers['last-event-id']);
    if (!stream) {
      res.status(204).end();
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      // nginx would otherwise buffer the stream and deliver frames late, in bursts.
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    req.socket.setNoDelay(true);
    let stopDelivery: (() => void) | undefined;
    const stop = () => stopDelivery?.();
    res.on('close', stop);
    // A client that left while the job was being looked up was 'close'd before we listened.
    if (res.destroyed) return;
    stopDelivery = stream.start(sseSink(res, settings.retryMs, stop));
  });
  return router;
}
