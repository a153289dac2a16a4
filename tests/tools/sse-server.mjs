#!/usr/bin/env node
// sse-server.mjs: a scripted stand-in for tether-plane, for tetherd's tests.
// It sends what the test scripts, byte for byte, so a test can push what
// the real plane would never send (a route before its cluster, a "../x"
// path, a wrong base, an older version, malformed JSON).
//
//   node sse-server.mjs --script FILE [--acks FILE] [--requests FILE]
//                       [--listen HOST:PORT]
//
// Listens on 127.0.0.1:0 unless --listen says otherwise and prints
// "listening PORT" on stdout once it accepts connections. Only the node
// standard library is used.
//
//   GET  /v1/stream   answers 200 text/event-stream and plays a script.
//   POST /v1/ack      appends the body (one JSON object per line) to --acks
//                     and answers {"result":"accepted"}.
//   GET  /healthz     {"status":"ok"}.
// Every request is appended to --requests as one JSON line:
//   {"n":K,"method":"GET","path":"/v1/stream","query":{...},"headers":{...}}
// where K counts stream requests from 1 (0 for other requests).
//
// The script file is read again for every stream request, so a test may
// rewrite it between connections. It is either an array of steps (played
// on every stream) or an object:
//   {"streams": [STEPS, STEPS, ...],   the Kth stream plays streams[K-1]
//    "then": STEPS}                    streams beyond the list (default [])
// A step is one of:
//   "raw text"                          written as is
//   {"text": "raw", "delay_ms": N}      waits N ms, then writes the text
//   {"event": "push", "data": OBJ|"raw", "id": "7", "delay_ms": N}
//                                       an SSE event; an object is
//                                       JSON.stringify'd, a string is sent
//                                       raw (it may be malformed JSON);
//                                       newlines in it become data: lines
//   {"delay_ms": N}                     just waits
//   {"wait_acks": N, "timeout_ms": T}   waits until N ACKs were recorded
//   {"keepalive_ms": N}                 from now on a ":\n\n" comment every
//                                       N ms (default: none, silent)
//   {"close": true}                     ends the response (last chunk)
//   {"status": 503, "body": "..."}      as the first step: answer this
//                                       status instead of a stream
// After the last step the stream stays open (silent unless keepalive).
import http from 'node:http';
import fs from 'node:fs';

function usage(msg) {
	process.stderr.write(`sse-server: ${msg}\n`);
	process.stderr.write('usage: sse-server.mjs --script FILE [--acks FILE] [--requests FILE] [--listen HOST:PORT]\n');
	process.exit(2);
}

const opts = { listen: '127.0.0.1:0' };
for (let i = 2; i < process.argv.length; i++) {
	const a = process.argv[i];
	const v = process.argv[i + 1];
	if (a === '--script' || a === '--acks' || a === '--requests' || a === '--listen') {
		if (v === undefined)
			usage(`${a} needs a value`);
		opts[a.slice(2)] = v;
		i++;
	} else {
		usage(`unknown argument '${a}'`);
	}
}
if (!opts.script)
	usage('--script is required');
const colon = opts.listen.lastIndexOf(':');
if (colon < 0)
	usage('--listen must be HOST:PORT');
const host = opts.listen.slice(0, colon);
const port = Number(opts.listen.slice(colon + 1));

let streams = 0;
let acks = 0;
const open = new Set();

function log(msg) {
	process.stderr.write(`${new Date().toISOString()} sse-server: ${msg}\n`);
}

function record(file, obj) {
	if (file)
		fs.appendFileSync(file, JSON.stringify(obj) + '\n');
}

function loadSteps(n) {
	let script;
	try {
		script = JSON.parse(fs.readFileSync(opts.script, 'utf8'));
	} catch (e) {
		log(`cannot read the script ${opts.script}: ${e.message}`);
		return [];
	}
	if (Array.isArray(script))
		return script;
	const list = Array.isArray(script.streams) ? script.streams : [];
	if (n <= list.length)
		return list[n - 1];
	return Array.isArray(script.then) ? script.then : [];
}

function sseEvent(step) {
	let out = '';
	if (step.event)
		out += `event: ${step.event}\n`;
	if (step.id !== undefined)
		out += `id: ${step.id}\n`;
	const data = typeof step.data === 'string' ? step.data : JSON.stringify(step.data ?? {});
	for (const line of data.split('\n'))
		out += `data: ${line}\n`;
	return out + '\n';
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function play(n, steps, res) {
	let closed = false;
	res.on('close', () => {
		closed = true;
	});
	let first = true;
	for (const step of steps) {
		if (closed)
			return;
		if (first && step && typeof step === 'object' && step.status) {
			res.writeHead(step.status, { 'Content-Type': 'application/json' });
			res.end(step.body ?? '');
			log(`stream ${n}: answered ${step.status}`);
			return;
		}
		if (first) {
			res.writeHead(200, {
				'Content-Type': 'text/event-stream',
				'Cache-Control': 'no-cache',
				'X-Accel-Buffering': 'no',
			});
			res.flushHeaders();
			first = false;
		}
		if (typeof step === 'string') {
			res.write(step);
			continue;
		}
		if (step.delay_ms)
			await sleep(step.delay_ms);
		if (closed)
			return;
		if (step.wait_acks !== undefined) {
			const deadline = Date.now() + (step.timeout_ms ?? 10000);
			while (acks < step.wait_acks && Date.now() < deadline && !closed)
				await sleep(20);
			if (acks < step.wait_acks)
				log(`stream ${n}: waited for ${step.wait_acks} ACKs, got ${acks}`);
		}
		if (step.keepalive_ms) {
			const t = setInterval(() => res.write(':\n\n'), step.keepalive_ms);
			res.on('close', () => clearInterval(t));
		}
		if (step.text !== undefined)
			res.write(step.text);
		if (step.event !== undefined || step.data !== undefined) {
			res.write(sseEvent(step));
			log(`stream ${n}: sent ${step.event ?? 'message'}`);
		}
		if (step.close) {
			res.end();
			log(`stream ${n}: closed by the script`);
			return;
		}
	}
	if (first) {
		res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
		res.flushHeaders();
	}
	log(`stream ${n}: script done, holding the stream open`);
}

const server = http.createServer((req, res) => {
	req.socket.setNoDelay(true);
	const url = new URL(req.url, 'http://x');
	const query = Object.fromEntries(url.searchParams);
	if (req.method === 'GET' && url.pathname === '/v1/stream') {
		const n = ++streams;
		record(opts.requests, { n, method: req.method, path: url.pathname, query, headers: req.headers });
		log(`stream ${n}: ${req.url}`);
		open.add(res);
		res.on('close', () => open.delete(res));
		play(n, loadSteps(n), res).catch((e) => {
			log(`stream ${n}: ${e.stack}`);
			res.destroy();
		});
		return;
	}
	record(opts.requests, { n: 0, method: req.method, path: url.pathname, query, headers: req.headers });
	if (req.method === 'POST' && url.pathname === '/v1/ack') {
		const chunks = [];
		req.on('data', (c) => chunks.push(c));
		req.on('end', () => {
			const body = Buffer.concat(chunks).toString('utf8').trim();
			let line = body;
			try {
				line = JSON.stringify(JSON.parse(body));
			} catch {
				line = JSON.stringify({ unparsable: body });
			}
			if (opts.acks)
				fs.appendFileSync(opts.acks, line + '\n');
			acks++;
			log(`ack: ${line}`);
			res.writeHead(200, { 'Content-Type': 'application/json' });
			res.end('{"result":"accepted"}\n');
		});
		return;
	}
	if (req.method === 'GET' && url.pathname === '/healthz') {
		res.writeHead(200, { 'Content-Type': 'application/json' });
		res.end('{"status":"ok"}\n');
		return;
	}
	res.writeHead(404, { 'Content-Type': 'application/json' });
	res.end('{"error":"not found"}\n');
});

server.keepAliveTimeout = 60000;
server.on('error', (e) => {
	log(e.message);
	process.exit(1);
});
server.listen(port, host, () => {
	process.stdout.write(`listening ${server.address().port}\n`);
});

function stop() {
	for (const r of open)
		r.destroy();
	server.close();
	process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
