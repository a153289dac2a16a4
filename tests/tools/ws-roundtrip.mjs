// ws-roundtrip.mjs: one websocket upgrade through a proxy and a round trip
// over the tunnel: sends Upgrade: websocket to URL, expects 101, writes a
// line and waits for it back (opts-backend.mjs echoes). Prints
// "upgraded URL echoed LINE" and exits 0, or prints why and exits 1.
//   node ws-roundtrip.mjs URL [WAIT_MS_BEFORE_WRITE]
import http from 'node:http';
import crypto from 'node:crypto';

const [url, waitMs = '0'] = process.argv.slice(2);
const line = 'tether-ws-' + crypto.randomBytes(4).toString('hex');
const req = http.request(url, { headers: { Connection: 'Upgrade', Upgrade: 'websocket',
	'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64') } });
const fail = (why) => { console.log(why); process.exit(1); };
req.setTimeout(20000, () => fail('timed out'));
req.on('response', (res) => fail(`no upgrade: status ${res.statusCode}`));
req.on('error', (e) => fail(`error: ${e.message}`));
req.on('upgrade', (res, socket) => {
	let got = '';
	socket.on('data', (d) => {
		got += d.toString();
		if (got.includes(line)) {
			console.log(`upgraded ${res.headers['x-seen-url']} echoed ${line}`);
			process.exit(0);
		}
	});
	socket.on('close', () => fail(`tunnel closed before the echo (got '${got}')`));
	setTimeout(() => socket.write(line + '\n'), Number(waitMs));
});
req.end();
