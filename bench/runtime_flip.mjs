// runtime_flip.mjs: bench/runtime.sh's writer and watcher. N changes of
// cluster/web's one endpoint, its port flipped between two backends
// (tests/tools/backend.mjs, answering "NAME PATH"): each a PUT on the plane,
// then GETs through the proxy, every millisecond on a new connection (no
// keep-alive: a connection held by an old worker would keep its old
// configuration), until the backend the change names answers. Writes one
// latency a line (ms, from just before the PUT) to OUT and prints
// "done N" at the end.
// Usage:
//   node runtime_flip.mjs --plane URL --proxy URL --changes N --out FILE \
//        --a NAME:PORT --b NAME:PORT
import fs from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? args[i + 1] : def;
};
const plane = opt('--plane');
const proxy = opt('--proxy');
const changes = Number(opt('--changes', '1000'));
const out = opt('--out');
const sides = [opt('--a'), opt('--b')].map((s) => {
	const [name, port] = (s || '').split(':');
	return { name, port: Number(port) };
});
if (!plane || !proxy || !out || !(changes > 0) || sides.some((s) => !s.name || !(s.port > 0))) {
	console.error('usage: node runtime_flip.mjs --plane URL --proxy URL --changes N --out FILE --a NAME:PORT --b NAME:PORT');
	process.exit(2);
}

function request(url, method, body) {
	return new Promise((resolve, reject) => {
		const req = http.request(url, { method, agent: false, timeout: 10000 }, (res) => {
			let data = '';
			res.setEncoding('utf8');
			res.on('data', (c) => { data += c; });
			res.on('end', () => resolve({ status: res.statusCode, body: data }));
		});
		req.on('timeout', () => req.destroy(new Error('timeout')));
		req.on('error', reject);
		if (body)
			req.write(body);
		req.end();
	});
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
	fs.writeFileSync(out, '');
	for (let i = 1; i <= changes; i++) {
		const to = sides[i % 2];
		const body = JSON.stringify({ lb: 'round_robin', endpoints: [{ address: '127.0.0.1', port: to.port }] });
		const t0 = performance.now();
		const put = await request(`${plane}/v1/resources/cluster/web`, 'PUT', body);
		if (put.status !== 200)
			throw new Error(`PUT ${i}: HTTP ${put.status} ${put.body}`);
		for (;;) {
			try {
				const r = await request(`${proxy}/x`, 'GET');
				if (r.body.startsWith(`${to.name} `))
					break;
			} catch {
				// a refused or reset poll: poll again
			}
			if (performance.now() - t0 > 30000)
				throw new Error(`change ${i} not served within 30 s`);
			await sleep(1);
		}
		fs.appendFileSync(out, `${(performance.now() - t0).toFixed(1)}\n`);
	}
	console.log(`done ${changes}`);
}
main().catch((e) => {
	console.error(`runtime_flip: ${e.message}`);
	process.exit(1);
});
