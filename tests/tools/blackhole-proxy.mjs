#!/usr/bin/env node
// blackhole-proxy.mjs: a selectively silent TCP proxy, for the silent dead
// stream of seed 002 (a stream that was established and then goes dark:
// no FIN, no RST, no byte).
//
//   node blackhole-proxy.mjs --target HOST:PORT [--mode MODE] [--nth N[,N...]]
//                            [--match TEXT] [--listen HOST:PORT]
//
// Listens on 127.0.0.1:0 unless --listen says otherwise and prints
// "listening PORT" on stdout once it accepts connections. Every connection
// is forwarded to --target, both ways, byte for byte, except:
//
//   --mode swallow-after-headers (default)
//       for the Nth request (counting from 1, only requests whose request
//       line contains --match, default: every request) the request and the
//       response headers are forwarded, then every further byte of the
//       response is silently discarded and the client's connection is held
//       open: no FIN, no RST, nothing, until the client gives up. The
//       upstream side keeps being read, so the server sees a healthy
//       reader. A request starts a connection or follows a complete
//       exchange on a kept-alive one (HTTP/1.1 clients do not pipeline).
//   --mode forward
//       forwards everything (a plain proxy).
//
// SIGUSR2, in either mode: every open connection whose latest request
// matched --match goes dark at once: what the server sends is discarded
// from then on and the connection is held open (a stream that worked and
// then died silently). Later connections are forwarded as before.
//
// Each decision is logged on stderr ("request K (match M): LINE: swallowed").
import net from 'node:net';

function usage(msg) {
	process.stderr.write(`blackhole-proxy: ${msg}\n`);
	process.stderr.write('usage: blackhole-proxy.mjs --target HOST:PORT [--mode swallow-after-headers|forward] ' +
		'[--nth N[,N...]] [--match TEXT] [--listen HOST:PORT]\n');
	process.exit(2);
}

function hostPort(s, what) {
	const i = s.lastIndexOf(':');
	if (i < 0 || !/^\d+$/.test(s.slice(i + 1)))
		usage(`${what} must be HOST:PORT`);
	return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
}

const opts = { mode: 'swallow-after-headers', nth: '1', match: '', listen: '127.0.0.1:0' };
for (let i = 2; i < process.argv.length; i++) {
	const a = process.argv[i];
	const v = process.argv[i + 1];
	if (['--target', '--mode', '--nth', '--match', '--listen'].includes(a)) {
		if (v === undefined)
			usage(`${a} needs a value`);
		opts[a.slice(2)] = v;
		i++;
	} else {
		usage(`unknown argument '${a}'`);
	}
}
if (!opts.target)
	usage('--target is required');
if (opts.mode !== 'swallow-after-headers' && opts.mode !== 'forward')
	usage(`unknown mode '${opts.mode}'`);
const target = hostPort(opts.target, '--target');
const listen = hostPort(opts.listen, '--listen');
const nth = new Set(opts.nth.split(',').map((x) => Number(x)));
for (const n of nth)
	if (!Number.isInteger(n) || n < 1)
		usage('--nth takes positive integers');

let conns = 0, requests = 0, matches = 0;
const held = new Set();
const live = new Map();   // connection id -> function that silences it

function log(msg) {
	process.stderr.write(`${new Date().toISOString()} blackhole-proxy: ${msg}\n`);
}

const REQUEST_LINE = /^[A-Z]+ \S+ HTTP\/1\.[01]\r?\n/;

const server = net.createServer((client) => {
	const id = ++conns;
	client.setNoDelay(true);
	const upstream = net.connect(target.port, target.host);
	upstream.setNoDelay(true);
	// swallow: 0 forward, 1 forwarding the headers of the doomed response,
	// 2 discarding its body
	let swallow = 0;
	let head = Buffer.alloc(0);
	let pending = Buffer.alloc(0);     // a request line still incomplete
	let discarded = 0;
	let lastMatched = false;

	live.set(id, () => {
		if (!lastMatched || swallow)
			return false;
		swallow = 2;
		held.add(client);
		log(`conn ${id}: SIGUSR2: from now on silence`);
		return true;
	});

	function onRequest(line) {
		requests++;
		const matched = line.includes(opts.match);
		lastMatched = matched;
		if (matched)
			matches++;
		const doomed = opts.mode === 'swallow-after-headers' && matched && nth.has(matches);
		log(`conn ${id}, request ${requests}${matched ? ` (match ${matches})` : ''}: ${line}: ` +
			(doomed ? 'swallowed after the headers' : 'forwarded'));
		if (doomed) {
			swallow = 1;
			held.add(client);
		}
	}

	client.on('data', (d) => {
		if (swallow === 0) {
			// look for a request line at the start of what the client sends
			// after a complete exchange
			const buf = pending.length ? Buffer.concat([pending, d]) : d;
			const text = buf.subarray(0, Math.min(buf.length, 8192)).toString('latin1');
			const nl = text.indexOf('\n');
			if (nl < 0 && buf.length < 8192 && /^[A-Z]+ /.test(text)) {
				pending = buf;       // wait for the whole request line
				return;
			}
			pending = Buffer.alloc(0);
			if (REQUEST_LINE.test(text))
				onRequest(text.slice(0, nl).replace(/\r$/, ''));
			upstream.write(buf);
			return;
		}
		upstream.write(d);
	});

	upstream.on('data', (d) => {
		if (swallow === 0) {
			client.write(d);
			return;
		}
		if (swallow === 2) {
			discarded += d.length;
			return;
		}
		head = Buffer.concat([head, d]);
		const end = head.indexOf('\r\n\r\n');
		if (end < 0)
			return;
		client.write(head.subarray(0, end + 4));
		discarded += head.length - end - 4;
		head = Buffer.alloc(0);
		swallow = 2;
		log(`conn ${id}: response headers forwarded; from now on silence`);
	});

	upstream.on('end', () => {
		if (swallow === 0)
			client.end();
		else
			log(`conn ${id}: upstream ended after ${discarded} discarded bytes; the client is not told`);
	});
	upstream.on('error', (e) => {
		if (swallow === 0)
			client.destroy();
		else
			log(`conn ${id}: upstream error (${e.message}); the client is not told`);
	});
	client.on('error', () => upstream.destroy());
	client.on('close', () => {
		if (swallow)
			log(`conn ${id}: the client closed the silent connection (${discarded} bytes discarded)`);
		held.delete(client);
		live.delete(id);
		upstream.destroy();
	});
});

server.on('error', (e) => {
	log(e.message);
	process.exit(1);
});
server.listen(listen.port, listen.host, () => {
	process.stdout.write(`listening ${server.address().port}\n`);
});

function stop() {
	process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGUSR2', () => {
	let n = 0;
	for (const silence of live.values())
		if (silence())
			n++;
	log(`SIGUSR2: ${n} connection(s) went dark`);
});
process.on('SIGINT', stop);
