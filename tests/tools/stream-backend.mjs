// stream-backend.mjs: a backend of long-lived answers, for the drain
// guard's test and benchmark (t0335, bench/drain.sh): GET /stream?ms=N
// answers 200 at once and then a line every 200 ms for N ms, and ends
// with "end\n" (ms=0: never ends); any other path answers "NAME PATH\n"
// at once. Prints "listening PORT" once ready. Usage:
//   node stream-backend.mjs PORT NAME     (PORT 0 picks a free one)
import http from 'node:http';

const [port = '0', name = 'stream'] = process.argv.slice(2);
const server = http.createServer((req, res) => {
	const url = new URL(req.url, 'http://x');
	res.setHeader('Content-Type', 'text/plain');
	if (url.pathname !== '/stream') {
		res.end(`${name} ${req.url}\n`);
		return;
	}
	const ms = Number(url.searchParams.get('ms') || '0');
	const t0 = Date.now();
	res.writeHead(200);
	res.write(`${name} stream\n`);
	const tick = setInterval(() => {
		if (ms > 0 && Date.now() - t0 >= ms) {
			clearInterval(tick);
			res.end('end\n');
			return;
		}
		res.write('.\n');
	}, 200);
	res.on('close', () => clearInterval(tick));
});
server.keepAliveTimeout = 1000;
server.maxConnections = 20000;
server.listen(Number(port), '127.0.0.1', () => {
	console.log(`listening ${server.address().port}`);
});
process.on('SIGTERM', () => {
	server.closeAllConnections();
	server.close(() => process.exit(0));
});
