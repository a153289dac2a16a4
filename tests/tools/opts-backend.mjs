// opts-backend.mjs: the backend of the route options' tests (t0990,
// t0991): answers every request with one line of JSON saying what it saw
// -- {"name","url","headers","body","port"} (the request's headers, the
// body's length, the client socket's port, which tells a reused upstream
// connection from a new one) -- and a response header X-Backend-Secret that
// a route may remove. ?sleep=MS waits that long before answering (a slow
// backend). An Upgrade: websocket request is answered 101 and the tunnel
// then echoes every byte. Prints "listening PORT" once ready.
//   node opts-backend.mjs PORT NAME
import http from 'node:http';
import crypto from 'node:crypto';

const [port = '0', name = 'backend'] = process.argv.slice(2);
const server = http.createServer((req, res) => {
	let n = 0;
	req.on('data', (d) => { n += d.length; });
	req.on('end', () => {
		const u = new URL(req.url, 'http://x');
		const answer = () => {
			res.setHeader('Content-Type', 'application/json');
			res.setHeader('X-Backend-Secret', 'hidden');
			res.end(JSON.stringify({ name, url: req.url, headers: req.headers, body: n,
						 port: req.socket.remotePort }) + '\n');
		};
		const ms = Number(u.searchParams.get('sleep') || 0);
		if (ms > 0)
			setTimeout(answer, ms);
		else
			answer();
	});
});
server.on('upgrade', (req, socket) => {
	const key = req.headers['sec-websocket-key'] || '';
	const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
	socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
		     `Sec-WebSocket-Accept: ${accept}\r\nX-Seen-Url: ${req.url}\r\n\r\n`);
	socket.on('data', (d) => socket.write(d));
	socket.on('error', () => {});
});
server.keepAliveTimeout = 30000;
server.listen(Number(port), '127.0.0.1', () => {
	console.log(`listening ${server.address().port}`);
});
process.on('SIGTERM', () => { server.close(); process.exit(0); });
