// backend.mjs: a tiny HTTP backend for tests and the demo: answers every
// request with "NAME PATH\n" (and the Host header in X-Seen-Host), prints
// "listening PORT" once ready. Usage:
//   node backend.mjs PORT NAME [HOST] [--status CODE] [--delay MS]
// (PORT 0 picks a free one; HOST defaults to 127.0.0.1). --status answers
// every request with that code (a broken cluster: 500); --delay waits that
// long before answering (a slow cluster).
import http from 'node:http';

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? args.splice(i, 2)[1] : def;
};
const status = Number(opt('--status', '200'));
const delay = Number(opt('--delay', '0'));
const [port = '0', name = 'backend', host = '127.0.0.1'] = args;
const server = http.createServer((req, res) => {
	const answer = () => {
		res.statusCode = status;
		res.setHeader('Content-Type', 'text/plain');
		res.setHeader('X-Seen-Host', req.headers.host || '');
		res.end(`${name} ${req.url}\n`);
	};
	if (delay > 0)
		setTimeout(answer, delay);
	else
		answer();
});
server.keepAliveTimeout = 1000;
server.listen(Number(port), host, () => {
	console.log(`listening ${server.address().port}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
