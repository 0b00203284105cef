import { createServer, type ServerResponse } from 'node:http';

/**
 * The floor for bench/stream: a bare node:http server holding SSE responses, with no
 * framework, database or auth. `GET /stream` opens one (and sends event 1); `POST /fire?id=N`
 * writes event N to all of them. Prints its port on stdout when listening.
 */
const open = new Set<ServerResponse>();
const frame = (id: number) =>
  `event: message\nid: ${id}\nretry: 5000\ndata: ${JSON.stringify({ status: 'running', progress: id / 100, resultStoragePath: null })}\n\n`;

const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://reference');
  if (req.method === 'GET' && url.pathname === '/stream') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    req.socket.setNoDelay(true);
    res.write(frame(1));
    open.add(res);
    res.on('close', () => open.delete(res));
    return;
  }
  if (req.method === 'POST' && url.pathname === '/fire') {
    const text = frame(Number(url.searchParams.get('id')));
    for (const stream of open) stream.write(text);
    res.end(String(open.size));
    return;
  }
  res.writeHead(404).end();
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${typeof address === 'object' && address ? address.port : 0}\n`);
});
