// holder.mjs: long-lived connections through a proxy, for the drain
// guard's test and benchmark (t0335, bench/drain.sh): keeps --streams
// answers of stream-backend.mjs open (GET /stream?ms=HOLD, each on a
// connection of its own, so each new one goes to the proxy's live
// workers), opening another as each one ends; --forever answers that never
// end; --fresh short requests a second to --fresh-path. A stream fails
// when it does not end with the backend's "end\n" (or, --forever, ends at
// all); a fresh request when it is not answered 200. Writes STATS_FILE (JSON:
// streams open, started, answered, done, failed; forever open and answered;
// fresh ok and failed; the first failures) every 200 ms and on SIGTERM, then exits. Prints
// "listening 0" once the first connections are asked for (for start_tool).
// Usage:
//   node holder.mjs STATS_FILE --url http://127.0.0.1:PORT [--streams N]
//        [--hold MS] [--forever K] [--fresh RATE] [--fresh-path /fresh]
import fs from 'node:fs';
import http from 'node:http';

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? args.splice(i, 2)[1] : def;
};
const base = opt('--url', '');
const streams = Number(opt('--streams', '0'));
const hold = Number(opt('--hold', '3000'));
const forever = Number(opt('--forever', '0'));
const fresh = Number(opt('--fresh', '0'));
const freshPath = opt('--fresh-path', '/fresh');
const [statsFile] = args;
if (!statsFile || !base || !(hold > 0)) {
	console.error('usage: node holder.mjs STATS_FILE --url URL [--streams N] [--hold MS] [--forever K] ' +
		'[--fresh RATE] [--fresh-path PATH]');
	process.exit(2);
}

// one connection per request: a new stream goes to the workers live now
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const st = { streams_open: 0, streams_started: 0, streams_answered: 0, streams_done: 0, streams_failed: 0,
	forever_open: 0, forever_answered: 0, fresh_ok: 0, fresh_failed: 0, failures: [] };
const live = new Set();
let stopping = false;

function failed(kind, why) {
	if (stopping)
		return;
	if (kind === 'fresh')
		st.fresh_failed++;
	else
		st.streams_failed++;
	if (st.failures.length < 10)
		st.failures.push(`${kind}: ${why}`);
}

// a stream of ms milliseconds (0: forever); again: open another when it ends
function stream(ms, again) {
	const endless = ms === 0;
	st.streams_started++;
	if (endless)
		st.forever_open++;
	else
		st.streams_open++;
	let body = '';
	let over = false;
	const done = (ok, why) => {
		if (over)
			return;
		over = true;
		live.delete(req);
		if (endless)
			st.forever_open--;
		else
			st.streams_open--;
		if (ok)
			st.streams_done++;
		else
			failed(endless ? 'forever' : 'stream', why);
		/* a refused connection is tried again a little later, not in a
		 * busy loop */
		if (again && !stopping)
			setTimeout(() => stream(hold, true), ok ? 0 : 100);
	};
	const req = http.get(`${base}/stream?ms=${ms}`, { agent }, (res) => {
		if (endless)
			st.forever_answered++;
		else
			st.streams_answered++;
		res.setEncoding('utf8');
		res.on('data', (c) => {
			body = (body + c).slice(-64);
		});
		res.on('end', () => {
			if (res.statusCode !== 200)
				done(false, `HTTP ${res.statusCode}`);
			else if (endless)
				done(false, 'an endless stream ended');
			else if (!body.endsWith('end\n'))
				done(false, `ended early: '${body.slice(-16)}'`);
			else
				done(true);
		});
		res.on('aborted', () => done(false, 'aborted'));
		res.on('error', (e) => done(false, e.message));
	});
	req.on('error', (e) => done(false, e.message));
	live.add(req);
}

function freshOne() {
	const req = http.get(base + freshPath, { agent, timeout: 5000 }, (res) => {
		res.resume();
		res.on('end', () => {
			if (res.statusCode === 200)
				st.fresh_ok++;
			else
				failed('fresh', `HTTP ${res.statusCode}`);
		});
	});
	req.on('timeout', () => req.destroy(new Error('timeout')));
	req.on('error', (e) => failed('fresh', e.message));
}

function write() {
	fs.writeFileSync(statsFile + '.tmp', JSON.stringify(st) + '\n');
	fs.renameSync(statsFile + '.tmp', statsFile);
}

for (let i = 0; i < forever; i++)
	stream(0, false);
// the first ones end spread over HOLD, so streams end and start all along
for (let i = 0; i < streams; i++)
	stream(Math.max(200, Math.round(hold * (i + 1) / streams)), true);
if (fresh > 0)
	setInterval(freshOne, 1000 / fresh);
setInterval(write, 200);
write();
console.log('listening 0');

process.on('SIGTERM', () => {
	stopping = true;
	for (const r of live)
		r.destroy();
	write();
	process.exit(0);
});
