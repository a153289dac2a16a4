// loadgen.mjs: steady HTTP traffic to every node's proxy, for the
// traffic-aware gate tests and benchmarks: RATE requests a second to each
// target, the paths in turn, over keep-alive connections, until SIGTERM or
// --duration. Every second (and at the end) it writes STATS_FILE: per
// target, requests and status counts, and the wall time (ms) of the first
// 5xx it saw. Prints "listening 0" once started (for start_tool).
// Usage:
//   node loadgen.mjs STATS_FILE --targets http://127.0.0.1:P1,... \
//        --paths /api/x,/web [--rate 50] [--duration SECONDS]
import fs from 'node:fs';
import http from 'node:http';

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? args.splice(i, 2)[1] : def;
};
const targets = opt('--targets', '').split(',').filter(Boolean);
const paths = opt('--paths', '/').split(',').filter(Boolean);
const rate = Number(opt('--rate', '50'));
const duration = Number(opt('--duration', '0'));
const [statsFile] = args;
if (!statsFile || targets.length === 0 || !(rate > 0)) {
	console.error('usage: node loadgen.mjs STATS_FILE --targets URL[,URL...] [--paths P,...] [--rate N] [--duration S]');
	process.exit(2);
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const stats = {};
for (const t of targets)
	stats[t] = { requests: 0, answered: 0, errors: 0, failed: 0, codes: {}, first_5xx_ms: null };

function fire(target) {
	const s = stats[target];
	const path = paths[s.requests % paths.length];   // each target gets every path in turn
	s.requests++;
	const req = http.get(target + path, { agent, timeout: 10000 }, (res) => {
		res.resume();
		res.on('end', () => {
			s.answered++;
			s.codes[res.statusCode] = (s.codes[res.statusCode] || 0) + 1;
			if (res.statusCode >= 500) {
				s.errors++;
				if (s.first_5xx_ms === null)
					s.first_5xx_ms = Date.now();
			}
		});
	});
	req.on('timeout', () => req.destroy(new Error('timeout')));
	req.on('error', () => { s.failed++; });
}

const started = Date.now();
const interval = 1000 / rate;
let sent = 0;
// one tick every few ms sends what the rate owes by now: steady, no drift
const tick = setInterval(() => {
	const owed = Math.floor((Date.now() - started) / interval);
	for (; sent < owed; sent++)
		for (const t of targets)
			fire(t);
	if (duration > 0 && Date.now() - started >= duration * 1000)
		stop();
}, 5);

function write() {
	fs.writeFileSync(statsFile + '.tmp', JSON.stringify({ started_ms: started, now_ms: Date.now(), targets: stats }));
	fs.renameSync(statsFile + '.tmp', statsFile);
}
const writer = setInterval(write, 1000);
function stop() {
	clearInterval(tick);
	clearInterval(writer);
	write();
	agent.destroy();
	process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
write();
console.log('listening 0');
