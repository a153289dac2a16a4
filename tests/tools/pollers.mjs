// pollers.mjs: N pollers of GET /v1/config, each a node of its own (PREFIX
// and a number) with its own version and ETag, for tests/integration/
// t0910-cache.sh (tetherd processes are too heavy for a thousand). One
// call makes one round: every poller polls once, all at the same time (at
// most --sockets connections open), from the version and ETag the state
// file gave it, with Accept-Encoding: gzip; a 200 moves it to the pushed
// version. Usage:
//   node pollers.mjs BASE_URL N PREFIX STATE_FILE [--sockets 100]
// STATE_FILE (JSON, node -> {version, etag}) is read if present and
// written after the round. Prints one JSON line: status and version counts,
// the nodes not at the most common version, errors, and the X-Cache-Status
// counts.
import fs from 'node:fs';
import http from 'node:http';
import zlib from 'node:zlib';

const args = process.argv.slice(2);
const opt = (name, def) => {
	const i = args.indexOf(name);
	return i >= 0 ? args.splice(i, 2)[1] : def;
};
const sockets = Number(opt('--sockets', '100'));
const [base, nArg, prefix, stateFile] = args;
if (!base || !nArg || !prefix || !stateFile) {
	console.error('usage: node pollers.mjs BASE_URL N PREFIX STATE_FILE [--sockets 100]');
	process.exit(2);
}
const n = Number(nArg);
let state = {};
try {
	state = JSON.parse(fs.readFileSync(stateFile, 'utf8'));
} catch (e) {
	if (e.code !== 'ENOENT')
		throw e;
}
const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });

function poll(node) {
	const st = state[node] || { version: 0, etag: '' };
	const url = `${base}/v1/config?node=${node}&version=${st.version}`;
	const headers = { 'Accept-Encoding': 'gzip' };
	if (st.etag)
		headers['If-None-Match'] = st.etag;
	return new Promise((resolve) => {
		const req = http.get(url, { agent, headers, timeout: 30000 }, (res) => {
			const chunks = [];
			res.on('data', (c) => chunks.push(c));
			res.on('end', () => {
				let body = Buffer.concat(chunks);
				const out = { node, status: res.statusCode, cache: res.headers['x-cache-status'] || '-' };
				try {
					if (res.statusCode === 200) {
						if (res.headers['content-encoding'] === 'gzip')
							body = zlib.gunzipSync(body);
						const push = JSON.parse(body.toString('utf8'));
						state[node] = { version: push.version, etag: res.headers.etag || '' };
					} else if (res.statusCode !== 304) {
						out.error = `HTTP ${res.statusCode}`;
					}
				} catch (e) {
					out.error = String(e);
				}
				resolve(out);
			});
		});
		req.on('timeout', () => req.destroy(new Error('timeout')));
		req.on('error', (e) => resolve({ node, error: String(e) }));
	});
}

const nodes = [];
for (let i = 0; i < n; i++)
	nodes.push(`${prefix}${String(i).padStart(4, '0')}`);
const t0 = Date.now();
const results = await Promise.all(nodes.map(poll));
const ms = Date.now() - t0;
agent.destroy();

const count = (m, k) => { m[k] = (m[k] || 0) + 1; };
const status = {}, versions = {}, cache = {};
const errors = [];
for (const r of results) {
	if (r.error)
		errors.push(`${r.node}: ${r.error}`);
	if (r.status)
		count(status, r.status);
	count(cache, r.cache || '-');
	count(versions, state[r.node] ? state[r.node].version : 0);
}
const top = Object.keys(versions).sort((a, b) => versions[b] - versions[a])[0];
const behind = nodes.filter((x) => String(state[x] ? state[x].version : 0) !== top);
fs.writeFileSync(stateFile, JSON.stringify(state));
console.log(JSON.stringify({ ms, status, versions, version: Number(top), behind: behind.slice(0, 10),
	nbehind: behind.length, errors: errors.slice(0, 10), nerrors: errors.length, cache }));
