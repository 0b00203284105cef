import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { AppError, sendError } from './errors';

/**
 * How long a client may take to send a request: bounds that keep a client who trickles bytes
 * (or sends none) from holding a connection. Every one is configuration (docs/operations.md).
 */
export interface SlowClientLimits {
  /** The request line and headers must arrive within this (Node's `headersTimeout`). */
  headersTimeoutMs: number;
  /** A body other than an upload chunk must arrive whole within this. */
  bodyTimeoutMs: number;
  /**
   * An upload chunk (hundreds of MiB on a slow link) has no total bound: it must deliver at
   * least `uploadMinBytes` in every `uploadIdleMs` window instead.
   */
  uploadIdleMs: number;
  uploadMinBytes: number;
  /** Open connections one client address may hold; 0 for no cap (behind a proxy). */
  maxConnectionsPerAddress: number;
}

export const SLOW_CLIENT_DEFAULTS: SlowClientLimits = {
  headersTimeoutMs: 20_000,
  bodyTimeoutMs: 30_000,
  uploadIdleMs: 30_000,
  uploadMinBytes: 16 * 1024,
  maxConnectionsPerAddress: 256,
};

const tooSlow = () =>
  new AppError('request_timeout', 'the request body did not arrive in time; send it again faster');

/**
 * Bounds the time a request body may take: whole within `bodyTimeoutMs`, or for a streamed
 * upload chunk (`streamed`) at least `uploadMinBytes` per `uploadIdleMs`. A stall while read
 * bytes wait in the request's buffer is ours (backpressure from storage), not the client's.
 * The answer is 408 and the connection is closed. The watch lasts until the body is in, not
 * until the answer: Node reads an unread body off after answering (a GET that declares one),
 * and that connection is cut the same way.
 */
export function bodyDeadline(
  limits: Pick<SlowClientLimits, 'bodyTimeoutMs' | 'uploadIdleMs' | 'uploadMinBytes'>,
  streamed: (req: Request) => boolean,
): RequestHandler {
  return (req, res, next) => {
    const upload = streamed(req);
    let seen = req.socket.bytesRead;
    const timer = setInterval(
      () => {
        if (req.complete || req.destroyed) {
          clearInterval(timer);
          return;
        }
        if (upload) {
          const read = req.socket.bytesRead;
          const progressed = read - seen >= limits.uploadMinBytes || req.readableLength > 0;
          seen = read;
          if (progressed) return;
        }
        clearInterval(timer);
        if (res.headersSent) req.socket.destroy();
        else sendError(req, res, tooSlow());
      },
      upload ? limits.uploadIdleMs : limits.bodyTimeoutMs,
    );
    timer.unref();
    req.once('close', () => clearInterval(timer));
    next();
  };
}

/**
 * The HTTP server of the API: a header deadline (Node answers 408 itself), no total request
 * deadline (uploads are bounded by `bodyDeadline` instead), and a cap of open connections per
 * client address; a connection over the cap is closed at once, before anything is read.
 */
export function createApiServer(app: RequestListener, limits: SlowClientLimits, logger: Logger): Server {
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: 0,
      // Node checks the header deadline on this period; a quarter keeps the overshoot small.
      connectionsCheckingInterval: Math.max(50, Math.min(30_000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    app,
  );
  if (limits.maxConnectionsPerAddress > 0) capConnections(server, limits.maxConnectionsPerAddress, logger);
  return server;
}

function capConnections(server: Server, cap: number, logger: Logger): void {
  const open = new Map<string, number>();
  let refusedSinceLog = 0;
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const count = open.get(address) ?? 0;
    if (count >= cap) {
      // One line per burst, not one per refused connection.
      if (refusedSinceLog++ === 0) {
        logger.warn({ address, cap }, 'connection cap per address reached: closing new connections');
        setTimeout(() => {
          refusedSinceLog = 0;
        }, 10_000).unref();
      }
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left === 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
