#!/usr/bin/env node
// httpprobe.mjs: raw-socket HTTP/1.1 probes of tether-plane's HTTP server,
// for tests/integration/t0112-plane-http-stall.sh,
// t0113-plane-http-framing.sh and bench/http_storm.sh. Only node's
// standard library (net, tls); every byte on the wire is the tool's own,
// and every answer is parsed strictly (status line, header lines ending in
// CRLF, CRLF CRLF, a body framed by Content-Length, chunked coding or the
// close), so a malformed answer is seen as such.
//
//   node httpprobe.mjs MODE HOST PORT [OPTIONS]
//
// Each mode prints JSON lines on stdout (one object per line, "mode" set)
// and exits 0 when it ran, whatever it found (the test judges); 2 for a
// usage error, 1 when the tool itself failed. Times are milliseconds from
// a monotonic clock (performance.now), never the wall clock.
//
// Modes:
//   stall --pid PID [--conns 128] [--rounds 3] [--hold-ms 300]
//         [--bound-ms 2000] [--late-ms 1000] [--keep-going]
//       Each round: N keep-alive connections, one GET /healthz on each and
//       its answer read; then the tool SIGSTOPs PID and waits until every
//       thread of it is stopped (/proc/PID/task/*/stat), writes one more
//       GET /healthz on each connection (waiting for every write to reach
//       the kernel), holds --hold-ms, SIGCONTs PID and waits until every
//       second request is answered 200 or --bound-ms passed since the
//       SIGCONT (then --late-ms more, to tell late answers from lost ones).
//       One line per round: {"mode":"stall","round":R,"conns":N,
//       "first_answered":N,"answered":A,"late":L,"missing":M,"slowest_ms":T,
//       "p50_ms":T,"statuses":{...},"errors":{...},"ok":true|false};
//       then {"mode":"stall","summary":true,"rounds_run":R,"rounds_ok":K,
//       "worst_answered":A,"slowest_ms":T,"ok":...}. Rounds stop at the
//       first failed one unless --keep-going. The tool SIGCONTs PID
//       whenever it exits.
//   storm [--conns 2000] [--rounds 2] [--bound-ms 10000] [--sources K]
//       Each round: C connections opened at once, each sending one
//       GET /healthz (Connection: close) as soon as it is connected; a
//       round ends when each has its answer or --bound-ms passed. One line
//       per round: {"mode":"storm","round":R,"conns":C,"answered":A,
//       "unanswered":U,"round_ms":T,"p50_ms":T,"p99_ms":T,"max_ms":T,
//       "statuses":{...},"errors":{...}}. --sources K binds the
//       connections to 127.0.0.2 .. 127.0.0.K+1 in turn (more ports).
//   framing [--wait-ms 3000]
//       The RFC 9112 framing cases, each on its own connection, all at
//       once: raw bytes, then everything the server sends until it closes
//       or --wait-ms passes (a case expecting N answers on a kept-alive
//       connection stops at N). One line per case: {"mode":"framing",
//       "case":NAME,"desc":TEXT,"statuses":[...],"wellformed":BOOL,
//       "problems":[...],"closed":"eof"|"reset"|null,"extra_bytes":B,
//       "ms":T,"head":"first answer's status line and headers"}.
//   early [--token T] [--length 31000000] [--path /v1/resources/cluster/x]
//         [--wait-ms 5000]
//       A PUT's headers announcing --length body bytes under a made-up
//       bearer token, and no body byte: {"mode":"early","status":S,
//       "answer_ms":T,"body_sent":0,"closed":...,"close_ms":T,
//       "wellformed":BOOL,"problems":[...],"head":"..."}.
//   flood --pid PID [--conns 20] [--length 31000000] [--token T]
//         [--timeout-ms 20000]
//       --conns such PUTs, each then writing body bytes as fast as the
//       socket takes them until the server closes (or the length is sent),
//       while PID's VmRSS is sampled every 20 ms: {"mode":"flood",
//       "conns":N,"rss_before_kb":K,"rss_max_kb":K,"rss_after_kb":K,
//       "sent_total":B,"sent_max":B,"closed":N,"completed_body":N,
//       "statuses":{...},"errors":{...},"ms":T}.
//   slow [--conns 200] [--interval-ms 500] [--deadline-ms 2000]
//        [--margin-ms 3000] [--probes 5] [--probe-gap-ms 200]
//        [--probe-bound-ms 2000]
//       --conns connections that send a request line and then one header
//       byte every --interval-ms, never ending the head. Once all are
//       connected, --probes GET /healthz on fresh connections, one after
//       the other (each bounded by --probe-bound-ms); then waits until
//       every slow connection was closed by the server or
//       --deadline-ms + --margin-ms passed since it connected:
//       {"mode":"slow","conns":N,"connected":N,"closed_in_time":N,
//       "closed_late":N,"still_open":N,"close_ms_min":T,"close_ms_max":T,
//       "answers_on_slow":{...},"probes":[{"status":S,"ms":T,
//       "slow_open":N,"error":...}],"probes_ok":N}.
//
// Common options: --tls (HTTPS; the certificate is not checked unless
// --ca FILE), --host-header VALUE (default HOST:PORT).
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';

// ---- arguments ------------------------------------------------------------------

const FLAGS = new Set(['--tls', '--keep-going']);
const argv = process.argv.slice(2);
const pos = [];
const opts = {};
for (let i = 0; i < argv.length; i++) {
	const a = argv[i];
	if (a.startsWith('--')) {
		if (FLAGS.has(a))
			opts[a.slice(2)] = true;
		else if (i + 1 < argv.length)
			opts[a.slice(2)] = argv[++i];
		else
			usage(`${a} needs a value`);
	} else {
		pos.push(a);
	}
}
const [MODE, HOST, PORT_ARG] = pos;
if (!MODE || !HOST || !PORT_ARG)
	usage('MODE HOST PORT are required');
const PORT = Number(PORT_ARG);
const TLS = !!opts.tls;
const CA = opts.ca ? fs.readFileSync(opts.ca) : null;
const HOSTHDR = opts['host-header'] || `${HOST}:${PORT}`;

function usage(msg) {
	console.error(`httpprobe: ${msg}`);
	console.error('usage: node httpprobe.mjs stall|storm|framing|early|flood|slow HOST PORT [OPTIONS]');
	process.exit(2);
}

function num(name, def) {
	if (opts[name] === undefined)
		return def;
	const v = Number(opts[name]);
	if (!Number.isFinite(v) || v < 0)
		usage(`--${name}: '${opts[name]}' is not a number`);
	return v;
}

const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const round1 = (x) => (x === null || x === undefined ? null : Math.round(x * 10) / 10);
const bump = (m, k) => { m[k] = (m[k] || 0) + 1; };

function pct(values, p) {
	if (!values.length)
		return null;
	const v = [...values].sort((a, b) => a - b);
	return v[Math.min(v.length - 1, Math.max(0, Math.ceil(p * v.length) - 1))];
}

// ---- a strict HTTP/1.1 response parser -------------------------------------------------

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const MAX_HEAD = 64 * 1024;
const KEEP_BODY = 4096;

// Parses a byte stream of responses. responses: the final (non-1xx)
// answers complete so far; interim: 1xx answers; problems: what was
// malformed (a response with a problem is not well formed); after end(),
// partial is true when bytes were left that made no complete answer.
class ResponseParser {
	constructor() {
		this.buf = Buffer.alloc(0);
		this.responses = [];
		this.interim = [];
		this.problems = [];
		this.cur = null;
		this.eof = false;
		this.partial = false;
		this.extraBytes = 0;
		this.broken = false;   // framing lost: the rest cannot be parsed
	}

	push(d) {
		if (this.broken) {
			this.extraBytes += d.length;
			return;
		}
		this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
		this.run();
	}

	end() {
		if (this.eof)
			return;
		this.eof = true;
		if (!this.broken)
			this.run();
		if (this.cur && this.cur.framing.kind === 'close') {
			this.finish();
		} else if (this.cur || this.buf.length) {
			this.partial = true;
			this.extraBytes += this.buf.length;
			this.problems.push(this.cur ? `truncated body (${this.cur.status})` :
				`${this.buf.length} bytes after the last answer that are no complete answer: ` +
				JSON.stringify(this.buf.subarray(0, 80).toString('latin1')));
			this.buf = Buffer.alloc(0);
		}
	}

	run() {
		for (;;) {
			if (!this.cur) {
				if (!this.buf.length)
					return;
				const i = this.buf.indexOf('\r\n\r\n');
				if (i < 0) {
					if (this.buf.length > MAX_HEAD) {
						this.problems.push(`no end of head in ${this.buf.length} bytes`);
						this.breakOff();
					}
					return;
				}
				const head = this.buf.subarray(0, i).toString('latin1');
				this.buf = this.buf.subarray(i + 4);
				this.cur = parseHead(head);
				if (!this.cur.ok) {
					this.problems.push(...this.cur.problems);
					this.cur = null;
					this.breakOff();
					return;
				}
				this.problems.push(...this.cur.problems.map((p) => `${this.cur.status}: ${p}`));
			}
			if (!this.body())
				return;
			this.finish();
		}
	}

	breakOff() {
		this.broken = true;
		this.extraBytes += this.buf.length;
		this.buf = Buffer.alloc(0);
	}

	keep(b) {
		const c = this.cur;
		c.bodyLen += b.length;
		if (c.kept.length < KEEP_BODY)
			c.kept.push(b.subarray(0, KEEP_BODY - c.kept.length));
	}

	// consumes body bytes; true when the current answer is complete
	body() {
		const c = this.cur, f = c.framing;
		if (f.kind === 'none')
			return true;
		if (f.kind === 'length') {
			const n = Math.min(f.left, this.buf.length);
			this.keep(this.buf.subarray(0, n));
			this.buf = this.buf.subarray(n);
			f.left -= n;
			return f.left === 0;
		}
		if (f.kind === 'close') {
			this.keep(this.buf);
			this.buf = Buffer.alloc(0);
			return false;   // complete only at the close (end())
		}
		// chunked
		for (;;) {
			if (f.state === 'size') {
				const i = this.buf.indexOf('\r\n');
				if (i < 0)
					return false;
				const line = this.buf.subarray(0, i).toString('latin1');
				this.buf = this.buf.subarray(i + 2);
				const m = /^([0-9a-fA-F]{1,15})[ \t]*(;.*)?$/.exec(line);
				if (!m) {
					this.problems.push(`${c.status}: bad chunk size line ${JSON.stringify(line.slice(0, 40))}`);
					this.cur = null;
					this.breakOff();
					return false;
				}
				f.left = parseInt(m[1], 16);
				f.state = f.left === 0 ? 'trailer' : 'data';
			} else if (f.state === 'data') {
				const n = Math.min(f.left, this.buf.length);
				this.keep(this.buf.subarray(0, n));
				this.buf = this.buf.subarray(n);
				f.left -= n;
				if (f.left)
					return false;
				f.state = 'crlf';
			} else if (f.state === 'crlf') {
				if (this.buf.length < 2)
					return false;
				if (this.buf[0] !== 13 || this.buf[1] !== 10) {
					this.problems.push(`${c.status}: chunk data not followed by CRLF`);
					this.cur = null;
					this.breakOff();
					return false;
				}
				this.buf = this.buf.subarray(2);
				f.state = 'size';
			} else {   // trailer section, up to an empty line
				const i = this.buf.indexOf('\r\n');
				if (i < 0)
					return false;
				const line = this.buf.subarray(0, i).toString('latin1');
				this.buf = this.buf.subarray(i + 2);
				if (line === '')
					return true;
			}
		}
	}

	finish() {
		const c = this.cur;
		this.cur = null;
		c.body = Buffer.concat(c.kept).toString('utf8');
		delete c.kept;
		c.at = now();
		if (c.status >= 100 && c.status < 200)
			this.interim.push(c);
		else
			this.responses.push(c);
	}

	get wellformed() {
		return this.problems.length === 0 && !this.partial && !this.broken;
	}
}

// parseHead TEXT: {ok, status, reason, headers: [[name, value]], problems,
// framing: {kind: none|length|chunked|close}, head}
function parseHead(head) {
	const r = { ok: true, status: null, headers: [], problems: [], head: head.slice(0, 2000), bodyLen: 0,
		kept: [] };
	if (/\r(?!\n)|(?<!\r)\n/.test(head))
		r.problems.push('a bare CR or LF in the head');
	const lines = head.split('\r\n');
	const m = /^HTTP\/1\.[01] ([1-9][0-9]{2})(?: ([^\r\n]*))?$/.exec(lines[0]);
	if (!m) {
		r.ok = false;
		r.problems.push(`bad status line ${JSON.stringify(lines[0].slice(0, 80))}`);
		return r;
	}
	r.status = Number(m[1]);
	r.reason = m[2] || '';
	for (const line of lines.slice(1)) {
		const c = line.indexOf(':');
		const name = c > 0 ? line.slice(0, c) : '';
		if (!TOKEN.test(name)) {
			r.problems.push(`bad header line ${JSON.stringify(line.slice(0, 80))}`);
			continue;
		}
		r.headers.push([name.toLowerCase(), line.slice(c + 1).replace(/^[ \t]+|[ \t]+$/g, '')]);
	}
	const all = (n) => r.headers.filter((h) => h[0] === n).map((h) => h[1]);
	const te = all('transfer-encoding');
	const cl = all('content-length');
	if ((r.status >= 100 && r.status < 200) || r.status === 204 || r.status === 304) {
		r.framing = { kind: 'none' };
	} else if (te.length) {
		if (cl.length)
			r.problems.push('both Transfer-Encoding and Content-Length');
		const codings = te.join(',').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
		r.framing = codings[codings.length - 1] === 'chunked' ? { kind: 'chunked', state: 'size', left: 0 }
			: { kind: 'close' };
	} else if (cl.length) {
		const vals = new Set(cl.join(',').split(',').map((s) => s.trim()));
		if (vals.size !== 1 || cl.length !== 1)
			r.problems.push(`Content-Length given as ${JSON.stringify(cl)}`);
		const v = [...vals][0];
		if (!/^[0-9]{1,12}$/.test(v)) {
			r.problems.push(`bad Content-Length ${JSON.stringify(v)}`);
			r.ok = false;
			return r;
		}
		r.framing = { kind: 'length', left: Number(v) };
	} else {
		r.framing = { kind: 'close' };
	}
	r.contentLength = cl.length === 1 ? cl[0] : null;
	return r;
}

// ---- connections ------------------------------------------------------------------

let sourceNext = 0;

// Conn: one client connection with its parser. closed: null while open,
// then 'eof' (the server closed), 'reset' or an error code; each change
// wakes the waiters of until().
class Conn {
	constructor({ onConnect, source } = {}) {
		this.parser = new ResponseParser();
		this.closed = null;
		this.connected = false;
		this.t0 = now();
		this.connectedAt = null;
		this.closedAt = null;
		this.error = null;
		this.sent = 0;
		this.waiters = new Set();
		const o = { host: HOST, port: PORT };
		if (source)
			o.localAddress = source;
		this.sock = TLS ? tls.connect({ ...o, rejectUnauthorized: !!CA, ca: CA || undefined,
			servername: net.isIP(HOST) ? undefined : HOST })
			: net.connect(o);
		this.sock.setNoDelay(true);
		this.sock.on(TLS ? 'secureConnect' : 'connect', () => {
			this.connected = true;
			this.connectedAt = now();
			if (onConnect)
				onConnect(this);
			this.wake();
		});
		this.sock.on('data', (d) => {
			this.parser.push(d);
			this.wake();
		});
		this.sock.on('error', (e) => {
			this.error = e.code || String(e);
			if (!this.closed)
				this.closed = e.code === 'ECONNRESET' ? 'reset' : this.error;
		});
		this.sock.on('close', () => {
			if (!this.closed)
				this.closed = 'eof';
			this.closedAt = now();
			this.parser.end();
			this.wake();
		});
	}

	wake() {
		for (const w of this.waiters)
			w();
	}

	// until PRED MS: resolves true once PRED() holds (checked at every event),
	// false after MS
	until(pred, ms) {
		if (pred())
			return Promise.resolve(true);
		return new Promise((resolve) => {
			const w = () => {
				if (pred()) {
					clearTimeout(t);
					this.waiters.delete(w);
					resolve(true);
				}
			};
			const t = setTimeout(() => {
				this.waiters.delete(w);
				resolve(pred());
			}, Math.max(0, ms));
			this.waiters.add(w);
		});
	}

	// write DATA: resolves when the bytes were handed to the kernel (or the
	// socket failed)
	write(data) {
		return new Promise((resolve) => {
			if (this.sock.destroyed)
				return resolve(false);
			this.sock.write(data, (err) => resolve(!err));
			this.sent += data.length;
		});
	}

	get answers() {
		return this.parser.responses;
	}

	destroy() {
		this.sock.destroy();
	}
}

const get = (path, extra = '') => `GET ${path} HTTP/1.1\r\nHost: ${HOSTHDR}\r\n${extra}\r\n`;

// waitAll CONNS PRED MS: waits until PRED(conn) holds for every conn or MS passed
async function waitAll(conns, pred, ms) {
	const end = now() + ms;
	await Promise.all(conns.map((c) => c.until(() => pred(c), end - now())));
}

// ---- process control (stall, flood) --------------------------------------------------

let stoppedPid = null;

function threadsStopped(pid) {
	let tasks;
	try {
		tasks = fs.readdirSync(`/proc/${pid}/task`);
	} catch {
		return false;
	}
	for (const t of tasks) {
		let st;
		try {
			st = fs.readFileSync(`/proc/${pid}/task/${t}/stat`, 'latin1');
		} catch {
			continue;   // a thread that just ended
		}
		const state = st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3);
		if (state !== 'T' && state !== 't')
			return false;
	}
	return true;
}

function resume() {
	if (stoppedPid !== null) {
		try {
			process.kill(stoppedPid, 'SIGCONT');
		} catch { /* gone */ }
		stoppedPid = null;
	}
}
process.on('exit', resume);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'])
	process.on(sig, () => { resume(); process.exit(1); });

function rssKb(pid) {
	try {
		const m = /^VmRSS:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'latin1'));
		return m ? Number(m[1]) : null;
	} catch {
		return null;
	}
}

// ---- stall --------------------------------------------------------------------------

async function stall() {
	const pid = num('pid', 0);
	if (!pid)
		usage('stall needs --pid');
	const n = num('conns', 128), rounds = num('rounds', 3), hold = num('hold-ms', 300);
	const bound = num('bound-ms', 2000), late = num('late-ms', 1000);
	const req = Buffer.from(get('/healthz'));
	let roundsOk = 0, roundsRun = 0, worst = n, slowestAll = 0;
	for (let r = 1; r <= rounds; r++) {
		roundsRun++;
		const conns = Array.from({ length: n }, () => new Conn({ onConnect: (c) => c.write(req) }));
		await waitAll(conns, (c) => c.answers.length >= 1 || c.closed, 10000);
		const firstOk = conns.filter((c) => c.answers.length >= 1 && c.answers[0].status === 200 && !c.closed);
		const line = { mode: 'stall', round: r, conns: n, first_answered: firstOk.length };
		process.kill(pid, 'SIGSTOP');
		stoppedPid = pid;
		const tStop = now();
		while (!threadsStopped(pid) && now() - tStop < 5000)
			await sleep(1);
		if (!threadsStopped(pid))
			line.error = 'the process did not stop within 5 s';
		await Promise.all(firstOk.map((c) => c.write(req)));
		await sleep(hold);
		process.kill(pid, 'SIGCONT');
		stoppedPid = null;
		const tCont = now();
		const done = (c) => c.answers.length >= 2 || c.closed;
		await waitAll(firstOk, done, bound);
		if (!firstOk.every(done))
			await waitAll(firstOk, done, tCont + bound + late - now());
		const times = [], statuses = {}, errors = {};
		let lateN = 0;
		for (const c of conns) {
			const a = c.answers[1];
			if (a) {
				bump(statuses, a.status);
				if (a.status === 200) {
					if (a.at - tCont <= bound)
						times.push(a.at - tCont);
					else
						lateN++;
				}
			} else if (c.closed) {
				bump(errors, c.closed);
			} else if (firstOk.includes(c)) {
				bump(errors, 'no answer');
			} else {
				bump(errors, 'first request unanswered');
			}
		}
		line.answered = times.length;
		line.late = lateN;
		line.missing = n - times.length - lateN;
		line.slowest_ms = round1(times.length ? Math.max(...times) : null);
		line.p50_ms = round1(pct(times, 0.5));
		line.statuses = statuses;
		line.errors = errors;
		line.ok = !line.error && line.first_answered === n && line.answered === n;
		out(line);
		for (const c of conns)
			c.destroy();
		worst = Math.min(worst, line.answered);
		slowestAll = Math.max(slowestAll, line.slowest_ms || 0);
		if (line.ok)
			roundsOk++;
		else if (!opts['keep-going'])
			break;
		await sleep(50);   // the server sees the closes before the next round
	}
	out({ mode: 'stall', summary: true, conns: n, rounds, rounds_run: roundsRun, rounds_ok: roundsOk,
		worst_answered: worst, slowest_ms: slowestAll, bound_ms: bound, hold_ms: hold,
		ok: roundsOk === rounds });
}

// ---- storm --------------------------------------------------------------------------

async function storm() {
	const n = num('conns', 2000), rounds = num('rounds', 2), bound = num('bound-ms', 10000);
	const sources = num('sources', 0);
	const req = Buffer.from(get('/healthz', 'Connection: close\r\n'));
	for (let r = 1; r <= rounds; r++) {
		const t0 = now();
		const conns = [];
		for (let i = 0; i < n; i++) {
			const source = sources ? `127.0.0.${2 + (sourceNext++ % sources)}` : undefined;
			conns.push(new Conn({ onConnect: (c) => c.write(req), source }));
		}
		await waitAll(conns, (c) => c.answers.length >= 1 || c.closed, bound);
		const times = [], statuses = {}, errors = {};
		let last = 0;
		for (const c of conns) {
			const a = c.answers[0];
			if (a) {
				bump(statuses, a.status);
				if (a.status === 200 && a.at - t0 <= bound) {
					times.push(a.at - t0);
					last = Math.max(last, a.at - t0);
				}
			} else {
				bump(errors, c.closed ? (c.connected ? `closed: ${c.closed}` : `connect: ${c.closed}`)
					: (c.connected ? 'no answer' : 'not connected'));
			}
		}
		out({ mode: 'storm', round: r, conns: n, answered: times.length, unanswered: n - times.length,
			round_ms: round1(last), p50_ms: round1(pct(times, 0.5)), p99_ms: round1(pct(times, 0.99)),
			max_ms: round1(times.length ? Math.max(...times) : null), bound_ms: bound, statuses, errors });
		for (const c of conns)
			c.destroy();
		await sleep(100);
	}
}

// ---- framing --------------------------------------------------------------------------

// A resource body, so a request the server wrongly runs leaves a trace
// (cluster/smuggled or cluster/framing in the store).
const BODY = '{"endpoints":[{"address":"10.0.0.1","port":80}]}';
const SMUGGLED = 'GET /v1/resources HTTP/1.1\r\nHost: H\r\n\r\n' +
	`PUT /v1/resources/cluster/smuggled HTTP/1.1\r\nHost: H\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`;
const chunk = (s) => `${s.length.toString(16)}\r\n${s}\r\n0\r\n\r\n`;

function put(headers, body) {
	return `PUT /v1/resources/cluster/framing HTTP/1.1\r\nHost: H\r\nContent-Type: application/json\r\n` +
		headers.map((h) => `${h}\r\n`).join('') + '\r\n' + body + SMUGGLED;
}

const CASES = [
	{ name: 'cl-differ', desc: 'two Content-Length headers with different values',
		bytes: put([`Content-Length: ${BODY.length}`, `Content-Length: ${BODY.length + 5}`], BODY) },
	{ name: 'cl-same', desc: 'two Content-Length headers with the same value',
		bytes: put([`Content-Length: ${BODY.length}`, `Content-Length: ${BODY.length}`], BODY) },
	{ name: 'cl-te', desc: 'Content-Length and then Transfer-Encoding: chunked',
		bytes: put([`Content-Length: ${BODY.length}`, 'Transfer-Encoding: chunked'], chunk(BODY)) },
	{ name: 'te-cl', desc: 'Transfer-Encoding: chunked and then Content-Length',
		bytes: put(['Transfer-Encoding: chunked', `Content-Length: ${chunk(BODY).length}`], chunk(BODY)) },
	{ name: 'ws-colon', desc: 'white space before a header\'s colon (Content-Length : N)',
		bytes: put([`Content-Length : ${BODY.length}`], BODY) },
	{ name: 'cl-huge', desc: 'Content-Length: 99999999999999999999999',
		bytes: put(['Content-Length: 99999999999999999999999'], BODY) },
	{ name: 'cl-negative', desc: 'Content-Length: -1', bytes: put(['Content-Length: -1'], BODY) },
	{ name: 'cl-space', desc: 'Content-Length: 1 2', bytes: put(['Content-Length: 1 2'], BODY) },
	{ name: 'pipelined', desc: 'two pipelined GET /healthz in one write', want: 2,
		bytes: 'GET /healthz HTTP/1.1\r\nHost: H\r\n\r\nGET /healthz HTTP/1.1\r\nHost: H\r\n\r\n' },
	{ name: 'pipelined-order', desc: 'three pipelined GETs (/healthz, /v1/nothing, /healthz)', want: 3,
		bytes: 'GET /healthz HTTP/1.1\r\nHost: H\r\n\r\nGET /v1/nothing HTTP/1.1\r\nHost: H\r\n\r\n' +
			'GET /healthz HTTP/1.1\r\nHost: H\r\n\r\n' },
];

async function framing() {
	const wait = num('wait-ms', 3000);
	const only = opts.case ? new Set(String(opts.case).split(',')) : null;
	const cases = CASES.filter((c) => !only || only.has(c.name));
	await Promise.all(cases.map(async (k) => {
		const c = new Conn();
		await c.until(() => c.connected || c.closed, 5000);
		const t0 = now();
		await c.write(Buffer.from(k.bytes.replaceAll('Host: H\r\n', `Host: ${HOSTHDR}\r\n`), 'latin1'));
		const enough = () => c.closed || (k.want && c.answers.length >= k.want);
		await c.until(enough, wait);
		if (k.want && c.answers.length >= k.want && !c.closed)
			await sleep(200);   // anything more than asked for would show now
		const line = {
			mode: 'framing', case: k.name, desc: k.desc,
			statuses: c.answers.map((a) => a.status),
			interim: c.parser.interim.map((a) => a.status),
			wellformed: c.parser.wellformed && !(c.parser.cur),
			problems: c.parser.problems.slice(0, 5),
			closed: c.closed === 'eof' || c.closed === 'reset' ? c.closed : (c.closed ? `error: ${c.closed}` : null),
			extra_bytes: c.parser.extraBytes + c.parser.buf.length,
			ms: round1((c.closedAt ?? now()) - t0),
			head: c.answers.length ? c.answers[0].head.split('\r\n').slice(0, 12).join(' | ') : null,
			body: c.answers.length ? c.answers[0].body.slice(0, 300) : null,
		};
		if (!c.closed && c.parser.cur)
			line.problems.push('an answer still incomplete');
		c.destroy();
		out(line);
	}));
}

// ---- early, flood ------------------------------------------------------------------------

function putHead(length, token) {
	const path = opts.path || '/v1/resources/cluster/x';
	return Buffer.from(`PUT ${path} HTTP/1.1\r\nHost: ${HOSTHDR}\r\nAuthorization: Bearer ${token}\r\n` +
		`Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`);
}

async function early() {
	const length = num('length', 31000000), wait = num('wait-ms', 5000);
	const c = new Conn();
	await c.until(() => c.connected || c.closed, 5000);
	const t0 = now();
	await c.write(putHead(length, opts.token || 'made-up-token'));
	const head = c.sent;
	await c.until(() => c.answers.length >= 1 || c.closed, wait);
	const a = c.answers[0];
	const answerMs = a ? a.at - t0 : null;
	await c.until(() => c.closed, wait);
	out({
		mode: 'early', length, status: a ? a.status : null, answer_ms: round1(answerMs),
		body_sent: c.sent - head, closed: c.closed, close_ms: c.closedAt ? round1(c.closedAt - t0) : null,
		answers: c.answers.length, wellformed: c.parser.wellformed, problems: c.parser.problems.slice(0, 5),
		head: a ? a.head.split('\r\n').slice(0, 12).join(' | ') : null, body: a ? a.body.slice(0, 300) : null,
	});
	c.destroy();
}

async function flood() {
	const pid = num('pid', 0);
	if (!pid)
		usage('flood needs --pid');
	const n = num('conns', 20), length = num('length', 31000000), limit = num('timeout-ms', 20000);
	const token = opts.token || 'made-up-token';
	const rssBefore = rssKb(pid);
	let rssMax = rssBefore || 0;
	const sampler = setInterval(() => { rssMax = Math.max(rssMax, rssKb(pid) || 0); }, 20);
	const t0 = now();
	const block = Buffer.alloc(64 * 1024, 'a');
	const conns = [];
	const pumps = [];
	for (let i = 0; i < n; i++) {
		const c = new Conn();
		conns.push(c);
		pumps.push((async () => {
			await c.until(() => c.connected || c.closed, 5000);
			if (c.closed)
				return;
			c.sock.write(putHead(length, token));
			c.body = 0;
			// as fast as the socket takes them: write until the buffer is
			// full, then wait for it to drain (or the close)
			while (!c.closed && c.body < length && now() - t0 < limit) {
				const b = c.body + block.length <= length ? block : block.subarray(0, length - c.body);
				c.body += b.length;
				if (!c.sock.write(b)) {
					await new Promise((resolve) => {
						const done = () => {
							clearTimeout(t);
							c.sock.off('drain', done);
							c.sock.off('close', done);
							resolve();
						};
						const t = setTimeout(done, Math.max(0, limit - (now() - t0)));
						c.sock.on('drain', done);
						c.sock.on('close', done);
					});
				}
			}
			// the answer, then the close (a server that keeps the connection
			// after its answer gets a second more)
			await c.until(() => c.closed || c.answers.length, limit - (now() - t0));
			await c.until(() => c.closed, Math.min(1000, limit - (now() - t0)));
		})());
	}
	await Promise.all(pumps);
	clearInterval(sampler);
	rssMax = Math.max(rssMax, rssKb(pid) || 0);
	const statuses = {}, errors = {};
	for (const c of conns) {
		if (c.answers.length)
			bump(statuses, c.answers[0].status);
		else
			bump(errors, c.closed ? `closed (${c.closed}) before an answer was read` : "open, no answer");
	}
	out({
		mode: 'flood', conns: n, length, rss_before_kb: rssBefore, rss_max_kb: rssMax, rss_after_kb: rssKb(pid),
		sent_total: conns.reduce((s, c) => s + (c.body || 0), 0),
		sent_max: Math.max(...conns.map((c) => c.body || 0)),
		completed_body: conns.filter((c) => c.body === length).length,
		closed: conns.filter((c) => c.closed).length, statuses, errors, ms: round1(now() - t0),
	});
	for (const c of conns)
		c.destroy();
}

// ---- slow headers --------------------------------------------------------------------------

async function slow() {
	const n = num('conns', 200), interval = num('interval-ms', 500), deadline = num('deadline-ms', 2000);
	const margin = num('margin-ms', 3000), nprobes = num('probes', 5), gap = num('probe-gap-ms', 200);
	const probeBound = num('probe-bound-ms', 2000);
	const line = Buffer.from(`GET /healthz HTTP/1.1\r\n`);
	const trickle = Buffer.from(`Host: ${HOSTHDR}\r\nX-Trickle: ${'a'.repeat(4096)}`);
	const conns = Array.from({ length: n }, () => new Conn({
		onConnect: (c) => {
			c.write(line);
			c.trickled = 0;
		},
	}));
	const timer = setInterval(() => {
		for (const c of conns) {
			if (c.connected && !c.closed && c.trickled < trickle.length)
				c.write(trickle.subarray(c.trickled, ++c.trickled));
		}
	}, interval);
	await waitAll(conns, (c) => c.connected || c.closed, 5000);
	const connected = conns.filter((c) => c.connected).length;
	const held = () => conns.filter((c) => c.connected && !c.closed).length;
	const probes = [];
	for (let i = 0; i < nprobes; i++) {
		if (i)
			await sleep(gap);
		const heldBefore = held();
		const p = new Conn({ onConnect: (c) => c.write(Buffer.from(get('/healthz', 'Connection: close\r\n'))) });
		const t0 = now();
		await p.until(() => p.answers.length >= 1 || p.closed, probeBound);
		const a = p.answers[0];
		probes.push({ status: a ? a.status : null, ms: round1(a ? a.at - t0 : now() - t0),
			slow_open_before: heldBefore, slow_open: held(),
			error: a ? undefined : (p.closed ? `closed: ${p.closed}` : `no answer in ${probeBound} ms`) });
		p.destroy();
	}
	// every slow connection: closed by the server by deadline + margin after it connected
	await Promise.all(conns.filter((c) => c.connected).map((c) =>
		c.until(() => c.closed, c.connectedAt + deadline + margin - now())));
	clearInterval(timer);
	const closeMs = [];
	let inTime = 0, lateN = 0, open = 0;
	const answers = {};
	for (const c of conns.filter((x) => x.connected)) {
		for (const a of c.answers)
			bump(answers, a.status);
		if (!c.closed) {
			open++;
			continue;
		}
		const ms = c.closedAt - c.connectedAt;
		closeMs.push(ms);
		if (ms <= deadline + margin)
			inTime++;
		else
			lateN++;
	}
	out({
		mode: 'slow', conns: n, connected, closed_in_time: inTime, closed_late: lateN, still_open: open,
		close_ms_min: round1(closeMs.length ? Math.min(...closeMs) : null),
		close_ms_max: round1(closeMs.length ? Math.max(...closeMs) : null),
		bytes_trickled_max: Math.max(0, ...conns.map((c) => c.trickled || 0)),
		deadline_ms: deadline, margin_ms: margin, answers_on_slow: answers, probes,
		probes_ok: probes.filter((p) => p.status === 200 && p.ms <= probeBound).length,
	});
	for (const c of conns)
		c.destroy();
}

// ---- main ------------------------------------------------------------------------------------

const MODES = { stall, storm, framing, early, flood, slow };
if (!MODES[MODE])
	usage(`unknown mode '${MODE}'`);
try {
	await MODES[MODE]();
	resume();
	process.exit(0);
} catch (e) {
	resume();
	console.error(`httpprobe: ${e.stack || e}`);
	process.exit(1);
}
