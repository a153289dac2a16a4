// backend.mjs: a tiny HTTP backend for tests and the demo: answers every
// request with "NAME PATH\n" (and the Host header in X-Seen-Host), prints
// "listening PORT" once ready. Usage: node backend.mjs PORT NAME [HOST]
// (PORT 0 picks a free one; HOST defaults to 127.0.0.1).
import http from 'node:http';

const [port = '0', name = 'backend', host = '127.0.0.1'] = process.argv.slice(2);
const server = http.createServer((req, res) => {
	res.setHeader('Content-Type', 'text/plain');
	res.setHeader('X-Seen-Host', req.headers.host || '');
	res.end(`${name} ${req.url}\n`);
});
server.keepAliveTimeout = 1000;
server.listen(Number(port), host, () => {
	console.log(`listening ${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
