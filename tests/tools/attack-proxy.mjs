#!/usr/bin/env node
// attack-proxy.mjs: a hostile middle box between a trusting tetherd
// (--trust) and tether-plane, in plain HTTP, for the trust tests: it
// changes, drops, adds, mixes, replays and withholds state, and forges
// pushes and signatures, so that only the plane's signed statements can
// catch it (docs/protocol.md, "Signed state").
//
//   node attack-proxy.mjs --target HOST:PORT [--listen HOST:PORT]
//                         [--key FILE] [--mode "MODE [ARG...]"]
//
// Listens on 127.0.0.1:0 unless --listen says otherwise and prints
// "listening PORT" on stdout once it accepts connections. Only the node
// standard library is used.
//
// Every request is forwarded to --target with its method, path, headers
// (Authorization included) and body, and the answer comes back the same
// way, except the answers of GET /v1/stream (text/event-stream), whose
// Server-Sent Events the current mode may rewrite. For streams the
// request's Accept-Encoding is dropped, so the plane answers in clear and
// the events can be parsed. POST /v1/ack passes untouched (the plane sees
// the NACKs; only /__ack-delay may hold it back); its body is logged.
//
// The mode is switched at run time on the proxy's own port:
//   POST /__mode   body "MODE [ARG...]"   answers "mode MODE [ARG...]"
//   POST /__ack-delay  body "MS"       from now on every POST /v1/ack is held
//                                      MS milliseconds before it goes on (0,
//                                      the start: at once): keeps an ACK in
//                                      flight, as a slow link would
//   GET  /__state                      {"mode","args","ack_delay_ms","streams",
//                                       "captured":[versions],"heartbeats" (forwarded),
//                                       "injected","rewritten","dropped","endless_bytes"}
// Modes (what happens to every stream from the switch on):
//   pass               forward every event as it is (the start)
//   tamper-body [NAME [PATH=VALUE]]
//                      as below, or with PATH=VALUE: the dotted PATH (keys,
//                      array indexes, e.g. endpoints.0.port) of NAME's body
//                      set to VALUE (JSON, else a string): a valid change
//                      only the digest catches
//   tamper-body [NAME] every push with upserts: one string field of the
//                      upsert NAME's body (default: the first upsert;
//                      "content" when it has one) reads "tampered by
//                      attack-proxy\n"; statement, nonce, the rest kept
//   drop-upsert [NAME] every push loses its upsert NAME (default: its last)
//   add-removal NAME   every delta removes NAME too (a snapshot, which
//                      cannot remove names, leaves NAME out instead)
//   mix [NAME]         every push: one upsert (NAME, default the first one
//                      that has one) gets the body and version of an older
//                      version of it seen earlier: two versions mixed
//   replay [VERSION]   the captured push of VERSION (default: the oldest
//                      captured) is sent again, into every open stream at
//                      the switch and into every new stream after its first
//                      event; everything else passes
//   freeze             the plane's pushes and heartbeats are swallowed; the
//                      last heartbeat captured (its old statement) is
//                      replayed at its interval instead. Leaving freeze
//                      ends the frozen streams (the node reconnects and
//                      gets the gap it missed)
//   fast-forward [signed] [next]
//                      injects (as replay does) a push of version 2^50 with
//                      a file resource "file/ff" (ff.txt) and no statement,
//                      or with "signed" the statement of the newest
//                      captured push (for another version); with "next",
//                      not at the switch but right before every push of
//                      the plane (which follows it, untouched)
//   endless [slow]     injects (as replay does) a push event whose data
//                      line never ends: 'x' for as long as the client
//                      reads (with "slow": one 'x' every 100 ms, under any
//                      size cap); the plane's later events on that stream
//                      are dropped
//   push-field KEY=VALUE
//                      every push's top-level KEY (outside the statement)
//                      set to VALUE (JSON), e.g. overridden=99: an unsigned
//                      claim a node with --trust must not believe
//   withhold           every push of the plane is swallowed; its heartbeats
//                      (with their fresh statements of the newer version)
//                      pass
//   unknown-key        every push's statement is re-signed by the proxy's
//                      own key: the same payload but for its "kid", which
//                      names the proxy's key
//   forged-sig         every push's statement keeps its payload (the
//                      trusted kid) with the proxy's signature
//   approvals-strip    a node's stream request loses its approvals=K (the
//                      open streams are closed at the switch, so the node
//                      reconnects): the plane, which then holds nothing
//                      back, sends its newest version, signed with its own
//                      key and unapproved -- a plane that ignores the hold
//   approvals-forge    injects (as replay does) the newest snapshot captured
//                      for the node as version 2^50, its statement's version
//                      changed and signed again with --key (give it the
//                      plane's own key: a stolen plane key), its approvals
//                      dropped: a state the plane's key vouches for that no
//                      approver approved
//   approvals-dup      every push's approvals: its first token twice
//   approvals-replay   every push's approvals: those of the oldest push
//                      captured for another version (a replay)
//   diff-empty         every answer of GET /v1/diff loses its changes: a
//                      plane that lies about what a version changed (what
//                      `tetherctl approve` shows and the base state it
//                      rebuilds)
// Heartbeats pass untouched in every mode but freeze.
//
// The proxy's key is --key FILE (a `tetherctl keygen` secret key; its kid
// is read from FILE.pub), else a fresh Ed25519 key made at start, whose
// kid is the first 8 bytes of its SHA-256 (not the real key-id formula,
// which is BLAKE2b-based: any kid not in --trust is unknown all the same).
// A statement is BASE64URL(payload) "." BASE64URL(Ed25519 signature over
// "tether-statement-v1\n" + payload).
//
// Every push captured from the plane is remembered (per node) for replay
// and mix. Each decision is logged on stderr, one line each
// ("stream 3 (n1): push 7: tamper-body: file/a.content changed").
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

function usage(msg) {
	process.stderr.write(`attack-proxy: ${msg}\n`);
	process.stderr.write('usage: attack-proxy.mjs --target HOST:PORT [--listen HOST:PORT] [--key FILE] ' +
		'[--mode "MODE [ARG]"]\n');
	process.exit(2);
}

function hostPort(s, what) {
	const i = s.lastIndexOf(':');
	if (i < 0 || !/^\d+$/.test(s.slice(i + 1)))
		usage(`${what} must be HOST:PORT`);
	return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
}

const opts = { listen: '127.0.0.1:0', mode: 'pass' };
for (let i = 2; i < process.argv.length; i++) {
	const a = process.argv[i];
	const v = process.argv[i + 1];
	if (['--target', '--listen', '--key', '--mode'].includes(a)) {
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
const target = hostPort(opts.target, '--target');
const listen = hostPort(opts.listen, '--listen');

function log(msg) {
	process.stderr.write(`${new Date().toISOString()} attack-proxy: ${msg}\n`);
}

const b64url = (buf) => Buffer.from(buf).toString('base64url');

// ---- the proxy's own signing key ------------------------------------------------
let key, kid;
if (opts.key) {
	const sec = fs.readFileSync(opts.key, 'utf8').trim().split(/\s+/);
	const raw = Buffer.from(sec[1] || '', 'base64');
	if (sec[0] !== 'tether-ed25519-secret' || raw.length !== 64)
		usage(`${opts.key} is not a tetherctl keygen secret key`);
	key = crypto.createPrivateKey({
		key: { kty: 'OKP', crv: 'Ed25519', d: b64url(raw.subarray(0, 32)), x: b64url(raw.subarray(32)) },
		format: 'jwk',
	});
	kid = fs.readFileSync(`${opts.key}.pub`, 'utf8').trim().split(/\s+/)[2];
	if (!/^[0-9a-f]{16}$/.test(kid || ''))
		usage(`${opts.key}.pub names no key id`);
} else {
	const pair = crypto.generateKeyPairSync('ed25519');
	key = pair.privateKey;
	const pk = Buffer.from(pair.publicKey.export({ format: 'jwk' }).x, 'base64url');
	kid = crypto.createHash('sha256').update(pk).digest('hex').slice(0, 16);
}

const DOMAIN = 'tether-statement-v1\n';

function signPayload(payload) {
	const sig = crypto.sign(null, Buffer.concat([Buffer.from(DOMAIN), payload]), key);
	return `${b64url(payload)}.${b64url(sig)}`;
}

// A statement with our kid (unknown-key) or with its own (forged-sig), the
// payload otherwise byte for byte the plane's.
function resign(token, keepKid) {
	const payload = Buffer.from(token.split('.')[0], 'base64url');
	if (keepKid)
		return signPayload(payload);
	const text = payload.toString('utf8');
	const swapped = text.replace(/"kid":"[0-9a-f]{16}"/, `"kid":"${kid}"`);
	return signPayload(Buffer.from(swapped, 'utf8'));
}

// ---- mode and memory --------------------------------------------------------------
let mode = 'pass', arg = '', args = [], ackDelay = 0;
const counters = { heartbeats: 0, injected: 0, rewritten: 0, dropped: 0, endless_bytes: 0 };
const nodes = new Map();   // node -> { pushes: [{version, obj, raw}], history: Map name -> [{version, body}], heartbeat }
const streams = new Set();
const MODES = ['pass', 'tamper-body', 'drop-upsert', 'add-removal', 'mix', 'replay', 'freeze', 'fast-forward',
	'endless', 'unknown-key', 'forged-sig', 'withhold', 'push-field', 'diff-empty'];
const INJECTING = ['replay', 'fast-forward', 'endless'];
MODES.push('approvals-strip', 'approvals-dup', 'approvals-replay', 'approvals-forge');
INJECTING.push('approvals-forge');

function memoryOf(node) {
	let m = nodes.get(node);
	if (!m) {
		m = { pushes: [], history: new Map(), heartbeat: null, interval: 0.5 };
		nodes.set(node, m);
	}
	return m;
}

function remember(m, raw, obj) {
	m.pushes.push({ version: obj.version, obj, raw });
	if (m.pushes.length > 200)
		m.pushes.shift();
	for (const u of obj.upserts || []) {
		const h = m.history.get(u.name) || [];
		const body = JSON.stringify(u.body);
		if (!h.length || h[h.length - 1].body !== body)
			h.push({ version: u.version, body });
		m.history.set(u.name, h);
	}
}

function modeLine() {
	return [mode, ...args].join(' ');
}

function setMode(line) {
	const parts = line.trim().split(/\s+/);
	const m = parts[0] || 'pass';
	if (!MODES.includes(m))
		return `unknown mode '${m}'`;
	const was = mode;
	mode = m;
	args = parts.slice(1);
	arg = args[0] || '';
	log(`mode ${modeLine()} (was ${was})`);
	for (const s of streams) {
		if (was === 'freeze' && mode !== 'freeze')
			s.endFrozen();
		if (mode === 'approvals-strip' || was === 'approvals-strip')
			s.end(mode);
		if (INJECTING.includes(mode))
			s.inject();
	}
	return null;
}

// ---- SSE --------------------------------------------------------------------------
function parseBlock(block) {
	const ev = { type: '', id: null, data: null };
	for (const line of block.split(/\r\n|\r|\n/)) {
		if (line === '' || line[0] === ':')
			continue;
		const c = line.indexOf(':');
		const f = c < 0 ? line : line.slice(0, c);
		let v = c < 0 ? '' : line.slice(c + 1);
		if (v[0] === ' ')
			v = v.slice(1);
		if (f === 'event')
			ev.type = v;
		else if (f === 'id')
			ev.id = v;
		else if (f === 'data')
			ev.data = ev.data === null ? v : ev.data + '\n' + v;
	}
	return ev;
}

function pushEvent(obj) {
	return `event: push\nid: ${obj.version}\ndata: ${JSON.stringify(obj)}\n\n`;
}

// Rewrites one push for the modes that change pushes; returns a description
// of the change, or null when the mode leaves this push alone.
function rewrite(obj, m) {
	const ups = Array.isArray(obj.upserts) ? obj.upserts : (obj.upserts = []);
	const find = (dflt) => arg ? ups.findIndex((u) => u.name === arg) : dflt;
	switch (mode) {
	case 'tamper-body': {
		const i = find(ups.length ? 0 : -1);
		if (i < 0)
			return null;
		const b = ups[i].body;
		const set = args.slice(1).find((x) => x.includes('='));
		if (set) {
			/* PATH=VALUE: a dotted path (keys, array indexes) set to VALUE
			 * (JSON when it parses, else a string): a change that stays
			 * valid, so only the digest can catch it */
			const [path, raw] = [set.slice(0, set.indexOf('=')), set.slice(set.indexOf('=') + 1)];
			let value = raw;
			try {
				value = JSON.parse(raw);
			} catch {
				/* a plain string */
			}
			const keys = path.split('.');
			let o = b;
			for (const k of keys.slice(0, -1)) {
				if (o === null || typeof o !== 'object' || !(k in o))
					return null;
				o = o[k];
			}
			o[keys[keys.length - 1]] = value;
			return `${ups[i].name}.${path} set to ${raw}`;
		}
		const field = typeof b.content === 'string' ? 'content' :
			Object.keys(b).find((k) => typeof b[k] === 'string');
		if (!field)
			return null;
		b[field] = 'tampered by attack-proxy\n';
		return `${ups[i].name}.${field} changed`;
	}
	case 'drop-upsert': {
		const i = find(ups.length - 1);
		if (i < 0)
			return null;
		const [gone] = ups.splice(i, 1);
		return `${gone.name} dropped`;
	}
	case 'add-removal': {
		if (!arg)
			return null;
		if (obj.full) {
			const i = ups.findIndex((u) => u.name === arg);
			if (i < 0)
				return null;
			ups.splice(i, 1);
			return `${arg} left out of the snapshot`;
		}
		if (!Array.isArray(obj.removed))
			obj.removed = [];
		if (obj.removed.includes(arg))
			return null;
		const i = ups.findIndex((u) => u.name === arg);
		if (i >= 0)
			ups.splice(i, 1);
		obj.removed.push(arg);
		return `${arg} removed`;
	}
	case 'mix': {
		for (let i = 0; i < ups.length; i++) {
			const u = ups[i];
			if (arg && u.name !== arg)
				continue;
			const body = JSON.stringify(u.body);
			const h = (m.history.get(u.name) || []).filter((x) => x.body !== body && x.version < u.version);
			if (!h.length)
				continue;
			const old = h[h.length - 1];
			u.body = JSON.parse(old.body);
			u.version = old.version;
			return `${u.name} of version ${old.version} mixed into version ${obj.version}`;
		}
		return null;
	}
	case 'push-field': {
		/* KEY=VALUE: a top-level field of every push set to VALUE (JSON);
		 * outside what the statement signs */
		const set = args.find((x) => x.includes('='));
		if (!set)
			return null;
		const key = set.slice(0, set.indexOf('='));
		obj[key] = JSON.parse(set.slice(set.indexOf('=') + 1));
		return `${key} set to ${set.slice(set.indexOf('=') + 1)}`;
	}
	case 'approvals-dup': {
		if (!Array.isArray(obj.approvals) || !obj.approvals.length)
			return null;
		obj.approvals = [obj.approvals[0], obj.approvals[0]];
		return 'approvals: the first token twice';
	}
	case 'approvals-replay': {
		const old = m.pushes.find((p) => p.version !== obj.version && Array.isArray(p.obj.approvals) &&
			p.obj.approvals.length);
		if (!old)
			return null;
		obj.approvals = old.obj.approvals.slice();
		return `approvals of version ${old.version} replayed`;
	}
	case 'unknown-key':
	case 'forged-sig':
		if (typeof obj.statement !== 'string')
			return null;
		obj.statement = resign(obj.statement, mode === 'forged-sig');
		return mode === 'unknown-key' ? `statement re-signed by key ${kid}` : 'statement signature forged';
	default:
		return null;
	}
}

let streamIds = 0;

function handleStream(req, res, up, node) {
	const id = ++streamIds;
	const m = memoryOf(node);
	const tag = `stream ${id} (${node})`;
	const dec = new StringDecoder('utf8');
	let pending = '';
	let events = 0;
	let endless = false, frozen = false, timer = null, closed = false;
	let lastVersion = 0;

	const write = (text) => {
		if (!closed)
			res.write(text);
	};

	const s = {
		inject(beforePush) {
			if (closed || endless)
				return;
			if (mode === 'fast-forward' && args.includes('next') !== !!beforePush)
				return;
			if (mode === 'replay') {
				const want = arg ? Number(arg) : null;
				const cand = m.pushes.filter((p) => want === null || p.version === want);
				const p = want === null ? cand[0] : cand[cand.length - 1];
				if (!p) {
					log(`${tag}: replay: no captured push${want === null ? '' : ' of version ' + want}`);
					return;
				}
				counters.injected++;
				log(`${tag}: replay: push ${p.version} (nonce ${p.obj.nonce}, base ${p.obj.base}) sent again`);
				write(p.raw);
			} else if (mode === 'fast-forward') {
				const big = 2 ** 50;
				const obj = {
					nonce: `attack-ff.${counters.injected + 1}`, version: big, base: lastVersion, full: false,
					upserts: [{ name: 'file/ff', version: big,
						body: { path: 'ff.txt', content: 'fast-forwarded by attack-proxy\n' } }],
					removed: [],
				};
				const newest = m.pushes[m.pushes.length - 1];
				if (args.includes('signed') && newest && typeof newest.obj.statement === 'string')
					obj.statement = newest.obj.statement;
				counters.injected++;
				log(`${tag}: fast-forward: push ${big} injected (${obj.statement ? 'with the statement of ' +
					'version ' + newest.version : 'unsigned'}, nonce ${obj.nonce})`);
				write(pushEvent(obj));
			} else if (mode === 'approvals-forge') {
				const p = [...m.pushes].reverse().find((q) => q.obj.full && typeof q.obj.statement === 'string');
				if (!p) {
					log(`${tag}: approvals-forge: no snapshot with a statement captured`);
					return;
				}
				const big = 2 ** 50;
				const obj = JSON.parse(JSON.stringify(p.obj));
				obj.nonce = `attack-forge.${counters.injected + 1}`;
				obj.version = big;
				delete obj.approvals;
				const text = Buffer.from(obj.statement.split('.')[0], 'base64url').toString('utf8')
					.replace(/"version":\d+}$/, `"version":${big}}`);
				obj.statement = signPayload(Buffer.from(text, 'utf8'));
				counters.injected++;
				log(`${tag}: approvals-forge: push ${big} injected: the state of version ${p.version}, ` +
					`its statement re-signed by key ${kid} for version ${big}, no approvals (nonce ${obj.nonce})`);
				write(pushEvent(obj));
			} else if (mode === 'endless') {
				endless = true;
				counters.injected++;
				log(`${tag}: endless: an event without end starts`);
				write('event: push\nid: 1\ndata: {"nonce":"attack-endless","version":1,"upserts":' +
					'[{"name":"file/endless","body":{"path":"endless.txt","content":"');
				if (arg === 'slow') {
					log(`${tag}: endless: one byte every 100 ms`);
					timer = setInterval(() => {
						counters.endless_bytes++;
						write('x');
					}, 100);
					return;
				}
				const chunk = 'x'.repeat(65536);
				const pump = () => {
					while (!closed) {
						counters.endless_bytes += chunk.length;
						if (!res.write(chunk))
							return;   /* 'drain' calls again */
					}
				};
				res.on('drain', pump);
				pump();
			}
		},
		end(why) {
			if (closed)
				return;
			log(`${tag}: ${why}: closing the stream (the node reconnects)`);
			clearInterval(timer);
			closed = true;
			res.end();
			up.destroy();
		},
		endFrozen() {
			if (!frozen)
				return;
			log(`${tag}: freeze ends: closing the stream (the node reconnects for the gap)`);
			clearInterval(timer);
			closed = true;
			res.end();
			up.destroy();
		},
	};
	streams.add(s);

	const startFreeze = () => {
		frozen = true;
		const iv = Math.max(0.05, Number(m.interval) || 0.5) * 1000;
		log(`${tag}: freeze: swallowing the plane's events, replaying the last heartbeat every ${iv} ms`);
		timer = setInterval(() => {
			if (m.heartbeat)
				write(m.heartbeat);
		}, iv);
	};

	const onBlock = (raw) => {
		const ev = parseBlock(raw);
		const first = ev.type !== '' && events++ === 0;
		if (endless) {
			counters.dropped++;
			return;
		}
		if (ev.type === 'heartbeat') {
			if (mode === 'freeze') {
				if (!frozen)
					startFreeze();
				counters.dropped++;
				log(`${tag}: freeze: heartbeat swallowed`);
				return;
			}
			try {
				const hb = JSON.parse(ev.data);
				if (hb.interval)
					m.interval = hb.interval;
				if (typeof hb.version === 'number')
					lastVersion = Math.max(lastVersion, hb.version);
			} catch (e) {
				/* forwarded all the same */
			}
			m.heartbeat = raw;
			counters.heartbeats++;
			write(raw);
		} else if (ev.type === 'push') {
			let obj;
			try {
				obj = JSON.parse(ev.data);
			} catch (e) {
				log(`${tag}: a push that is not JSON: forwarded`);
				write(raw);
				return;
			}
			const orig = JSON.parse(ev.data);
			remember(m, raw, orig);
			if (mode === 'freeze') {
				if (!frozen)
					startFreeze();
				counters.dropped++;
				log(`${tag}: freeze: push ${obj.version} swallowed`);
				return;
			}
			if (mode === 'withhold') {
				counters.dropped++;
				log(`${tag}: withhold: push ${obj.version} swallowed (heartbeats pass)`);
				return;
			}
			if (mode === 'fast-forward' && args.includes('next'))
				s.inject(true);
			lastVersion = Math.max(lastVersion, Number(obj.version) || 0);
			const what = rewrite(obj, m);
			if (what) {
				counters.rewritten++;
				log(`${tag}: push ${obj.version} (nonce ${obj.nonce}, ${obj.full ? 'snapshot' : 'base ' + obj.base}): ` +
					`${mode}: ${what}`);
				write(pushEvent(obj));
			} else {
				log(`${tag}: push ${obj.version} (nonce ${obj.nonce}, ${obj.full ? 'snapshot' : 'base ' + obj.base}, ` +
					`${(obj.upserts || []).length} upserts, ${(obj.removed || []).length} removed): forwarded`);
				write(raw);
			}
		} else {
			write(raw);   /* retry:, comments, other events */
		}
		if (first && INJECTING.includes(mode))
			s.inject();
		else if (first && mode === 'freeze' && !frozen)
			startFreeze();
	};

	up.on('data', (d) => {
		pending += dec.write(d);
		let mt;
		while ((mt = /\r\n\r\n|\n\n|\r\r/.exec(pending))) {
			const end = mt.index + mt[0].length;
			const block = pending.slice(0, end);
			pending = pending.slice(end);
			onBlock(block);
		}
	});
	up.on('end', () => {
		log(`${tag}: the plane ended the stream`);
		if (!closed && !endless) {
			closed = true;
			res.end();
		}
	});
	up.on('error', () => {
		if (!closed)
			res.destroy();
	});
	res.on('close', () => {
		if (endless)
			log(`${tag}: endless: the client closed the stream (${counters.endless_bytes} bytes of endless so far)`);
		else
			log(`${tag}: closed`);
		closed = true;
		clearInterval(timer);
		streams.delete(s);
		up.destroy();
	});
	log(`${tag}: opened (${req.url})`);
}

// ---- HTTP -------------------------------------------------------------------------
const server = http.createServer((req, res) => {
	req.socket.setNoDelay(true);
	if (req.url === '/__mode' || req.url === '/__state' || req.url === '/__ack-delay') {
		let body = '';
		req.on('data', (d) => { body += d; });
		req.on('end', () => {
			if (req.url === '/__state') {
				res.writeHead(200, { 'Content-Type': 'application/json' });
				res.end(JSON.stringify({
					mode, args, ack_delay_ms: ackDelay, streams: streams.size,
					captured: [...nodes.values()].flatMap((m) => m.pushes.map((p) => p.version)),
					...counters,
				}) + '\n');
				return;
			}
			if (req.method !== 'POST') {
				res.writeHead(405, { Allow: 'POST' });
				res.end();
				return;
			}
			if (req.url === '/__ack-delay') {
				const ms = Number(body.trim());
				if (!Number.isInteger(ms) || ms < 0) {
					res.writeHead(400, { 'Content-Type': 'text/plain' });
					res.end('ack-delay takes milliseconds\n');
					return;
				}
				ackDelay = ms;
				log(`ack-delay ${ms} ms`);
				res.writeHead(200, { 'Content-Type': 'text/plain' });
				res.end(`ack-delay ${ms}\n`);
				return;
			}
			const e = setMode(body);
			res.writeHead(e ? 400 : 200, { 'Content-Type': 'text/plain' });
			res.end(e ? `${e}\n` : `mode ${modeLine()}\n`);
		});
		return;
	}
	const isStream = req.method === 'GET' && req.url.startsWith('/v1/stream');
	const headers = { ...req.headers, host: `${target.host}:${target.port}` };
	if (isStream || (mode === 'diff-empty' && req.url.startsWith('/v1/diff')))
		delete headers['accept-encoding'];
	let path = req.url;
	if (isStream && mode === 'approvals-strip' && /[?&]approvals=/.test(path)) {
		path = path.replace(/([?&])approvals=[^&]*&?/, '$1').replace(/[?&]$/, '');
		log(`approvals-strip: ${req.url} forwarded as ${path}`);
	}
	const upReq = http.request({ host: target.host, port: target.port, method: req.method, path, headers,
		agent: false }, (up) => {
		up.socket.setNoDelay(true);
		const ct = String(up.headers['content-type'] || '');
		if (isStream && up.statusCode === 200 && ct.startsWith('text/event-stream')) {
			const h = { ...up.headers };
			for (const k of ['content-length', 'transfer-encoding', 'connection', 'content-encoding'])
				delete h[k];
			res.writeHead(200, h);
			res.flushHeaders();
			const node = new URL(req.url, 'http://x').searchParams.get('node') || '?';
			handleStream(req, res, up, node);
			return;
		}
		if (mode === 'diff-empty' && req.method === 'GET' && req.url.startsWith('/v1/diff') &&
		    up.statusCode === 200) {
			const chunks = [];
			up.on('data', (d) => chunks.push(d));
			up.on('end', () => {
				const doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
				log(`diff-empty: ${req.url}: ${(doc.changes || []).length} changes dropped`);
				doc.changes = [];
				const out = Buffer.from(JSON.stringify(doc) + '\n');
				const h = { ...up.headers, 'content-length': String(out.length) };
				delete h['transfer-encoding'];
				res.writeHead(200, h);
				res.end(out);
			});
			return;
		}
		res.writeHead(up.statusCode, up.headers);
		up.pipe(res);
	});
	upReq.on('error', (e) => {
		log(`${req.method} ${req.url}: upstream: ${e.message}`);
		if (!res.headersSent)
			res.writeHead(502, { 'Content-Type': 'application/json' });
		res.end('{"error":"attack-proxy: upstream unreachable"}');
	});
	res.on('close', () => upReq.destroy());
	if (req.method === 'POST' && req.url.startsWith('/v1/ack')) {
		const chunks = [];
		const delay = ackDelay;
		req.on('data', (d) => chunks.push(d));
		req.on('end', () => {
			const body = Buffer.concat(chunks);
			log(`ack${delay ? ` (held ${delay} ms)` : ''}: ${body.toString('utf8', 0, 4096)}`);
			setTimeout(() => upReq.end(body), delay);
		});
		return;
	}
	req.pipe(upReq);
});

server.on('error', (e) => {
	log(e.message);
	process.exit(1);
});
const initial = setMode(opts.mode);
if (initial)
	usage(initial);
server.listen(listen.port, listen.host, () => {
	process.stdout.write(`listening ${server.address().port}\n`);
});

function stop() {
	process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
