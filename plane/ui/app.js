// The tether fleet console (GET /ui/): reads /healthz, /v1/nodes,
// /v1/rollouts/current and /v1/history (when the plane has it), then
// follows GET /v1/events with fetch() streaming (an EventSource cannot send
// an Authorization header) and updates the page in place. The token comes
// from a link of 'tetherctl ui' (#s=TOKEN: a read-only session that
// expires, in the fragment, which no browser sends) or is typed in the
// login bar; it is kept in sessionStorage; no cookies. Everything a node
// or a writer controls goes into the page as text, never as markup.
'use strict';

const KEY = 'tether.token';
const state = {
	token: sessionStorage.getItem(KEY) || '',
	version: 0,
	nodes: new Map(),      // node -> its /v1/nodes record
	rollout: null,
	history: null,         // null: the plane has no /v1/history
	seen: [],              // versions seen on the stream (history's fallback)
	lastId: '',
	filter: [],
	started: false,
	stale: null,           // {since, why} while the plane is stale
	freeze: null,          // {until, message, by, at} while a freeze window holds
};
window.tetherConsole = state;   // for tests and the curious

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (k === 'class')
			e.className = v;
		else
			e.setAttribute(k, v);
	}
	for (const k of kids) {
		if (k !== null && k !== undefined)
			e.append(k instanceof Node ? k : String(k));
	}
	return e;
}

function headers() {
	return state.token ? { Authorization: 'Bearer ' + state.token } : {};
}

class AuthError extends Error {}

// A link of 'tetherctl ui' carries a console session in its fragment
// (#s=TOKEN): taken, kept for this tab, and removed from the address bar
// (and so from the history) before anything is fetched.
function tokenFromLink() {
	const m = /(?:^#|&)s=([^&]+)/.exec(location.hash);
	if (!m)
		return;
	history.replaceState(null, '', location.pathname + location.search);
	try {
		state.token = decodeURIComponent(m[1]);
	} catch (e) {
		return;   // not a token: the login bar asks for one
	}
	sessionStorage.setItem(KEY, state.token);
}

// What a refusal (401, 403) says, in words for the login bar.
async function refusal(r) {
	let msg = '';
	try {
		msg = (await r.json()).error || '';
	} catch (e) {
		// no JSON: the status says enough
	}
	if (r.status === 401 && / expired at /.test(msg))
		return 'this console session has expired: run \u2018tetherctl ui\u2019 for a new link, or give a token';
	if (r.status === 401)
		return 'the plane wants a valid token' + (msg ? ' (' + msg + ')' : '');
	return 'this token may not read';
}

async function getJSON(path) {
	const r = await fetch(path, { headers: headers(), cache: 'no-store', credentials: 'omit' });
	if (r.status === 401 || r.status === 403)
		throw new AuthError(await refusal(r));
	if (r.status === 404)
		return null;
	if (!r.ok)
		throw new Error(path + ': HTTP ' + r.status);
	return r.json();
}

// seconds since the epoch (the plane's times), milliseconds or ISO text
function fmtTime(t) {
	if (!t)
		return '';
	const d = typeof t === 'number' ? new Date(t > 1e11 ? t : t * 1000) : new Date(t);
	if (isNaN(d))
		return '';
	return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

// ---- node states -----------------------------------------------------------
// offline: not connected. NACKed: its last NACK is newer than what it ACKed.
// stale: it refused a push that failed its --trust checks after its last
// ACK (it runs older signed state it cannot refresh), or the plane says so.
// lagging: behind its target (the plane's `lagging`, or a lag above 0).
// synced: at its target.
function nodeState(n) {
	if (!n.connected)
		return 'offline';
	if (n.last_nack && n.last_nack.version > (n.acked_version || 0))
		return 'nacked';
	if (n.stale || (n.last_verify_failure && n.last_verify_failure.version > (n.acked_version || 0)))
		return 'stale';
	if (n.lagging || (n.lag || 0) > 0)
		return 'lagging';
	return 'synced';
}

const STATE_NAMES = { synced: 'synced', lagging: 'lagging', nacked: 'NACKed', offline: 'offline', stale: 'stale' };

function parseFilter(text) {
	return text.split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
		const i = s.indexOf('=');
		return i < 0 ? { key: s, value: null } : { key: s.slice(0, i).trim(), value: s.slice(i + 1).trim() };
	});
}

function matches(n) {
	const labels = n.labels || {};
	return state.filter.every((f) => (f.value === null ? f.key in labels : labels[f.key] === f.value));
}

// ---- rendering -------------------------------------------------------------

function renderVersion() {
	$('version').textContent = String(state.version);
}

// a plane cut off from its source says so (GET /v1/status, 'plane' events)
function renderStale() {
	const b = $('stale');
	const s = state.stale;
	b.hidden = !s;
	if (s)
		b.textContent = 'This plane is stale since ' + fmtTime(s.since) + ': ' + s.why +
			'. It serves what it holds and takes no writes; its nodes move to a plane that is current. ' +
			'Lag here is judged against the version it holds.';
}

// a freeze window: every write refused, rollouts held (GET /v1/status,
// 'freeze' and 'thaw' events)
function renderFreeze() {
	const b = $('freeze');
	const f = state.freeze;
	b.hidden = !f;
	if (f)
		b.textContent = 'Frozen until ' + new Date(f.until * 1000).toISOString().replace('.000Z', 'Z') + ' by ' +
			f.by + ': ' + f.message + '. Writes are refused and rollouts held; an admin may pass with --override.';
}

async function loadStatus() {
	const st = await getJSON('/v1/status');
	if (!st)
		return;
	if (st.version > state.version)
		state.version = st.version;
	state.stale = st.stale || null;
	state.freeze = st.freeze || null;
}

// Why a node is not at its target: its NACK, or a held NACK (it waits for
// a writer to seal a secret to its key: not a failure).
function memberReason(n) {
	if (n.held && n.held.version > (n.acked_version || 0) &&
	    !(n.last_nack && n.last_nack.version > n.held.version))
		return 'held: ' + n.held.reason;
	return n.last_nack ? 'v' + n.last_nack.version + ': ' + n.last_nack.error : '';
}

// One view of the fleet (the nodes the label filter keeps) for the counts,
// the node table and the NACK panel alike, so they cannot disagree: each
// node's state; the NACKs of the nodes whose state is NACKed (what the
// count counts), and the others' last NACKs (they ACKed since, or are
// offline) apart.
function fleetView() {
	const view = { counts: { synced: 0, lagging: 0, nacked: 0, offline: 0, stale: 0 }, nodes: [], nacked: [], before: [] };
	const nodes = [...state.nodes.values()].sort((a, b) => a.node.localeCompare(b.node));
	for (const n of nodes) {
		if (!matches(n))
			continue;
		const s = nodeState(n);
		view.counts[s]++;
		view.nodes.push({ n, s });
		if (n.last_nack)
			(s === 'nacked' ? view.nacked : view.before).push({ node: n.node, version: n.last_nack.version,
				error: n.last_nack.error, time: n.last_nack.time });
	}
	const newest = (a, b) => (b.time || 0) - (a.time || 0) || b.version - a.version;
	view.nacked.sort(newest);
	view.before.sort(newest);
	return view;
}

function renderNodes() {
	const view = fleetView();
	const rows = view.nodes.map(({ n, s }) => {
		const labels = el('td');
		for (const [k, v] of Object.entries(n.labels || {}))
			labels.append(el('span', { class: 'label' }, k + '=' + v));
		return el('tr', { 'data-node': n.node, 'data-state': s },
			el('td', {}, n.node),
			el('td', {}, el('span', { class: 'state ' + s }, STATE_NAMES[s])),
			el('td', {}, n.acked_version ?? ''),
			el('td', {}, n.target_version ?? ''),
			labels,
			el('td', { class: 'err' }, memberReason(n)));
	});
	$('nodes').tBodies[0].replaceChildren(...rows);
	for (const [k, v] of Object.entries(view.counts))
		$('n-' + k).textContent = String(v);
	renderNacks(view);
}

function nackItem(k, cls) {
	return el('li', { class: cls, 'data-node': k.node, 'data-version': String(k.version) },
		el('strong', {}, k.node), ' refused version ', String(k.version),
		k.time ? ' at ' + fmtTime(k.time) : '', ': ',
		el('span', { class: 'nack-error' }, k.error || ''));
}

function renderNacks(view) {
	view = view || fleetView();
	$('nacks').replaceChildren(...(view.nacked.length ? view.nacked.slice(0, 50).map((k) => nackItem(k, 'nack')) :
		[el('li', { class: 'none' }, 'none')]));
	$('nacks-before-box').hidden = !view.before.length;
	$('nacks-before').replaceChildren(...view.before.slice(0, 20).map((k) => nackItem(k, 'nack-before')));
}

function renderRollout() {
	const box = $('rollout');
	const r = state.rollout;
	if (!r) {
		box.replaceChildren(el('p', { class: 'none' }, 'no rollout'));
		box.removeAttribute('data-id');
		return;
	}
	box.setAttribute('data-id', String(r.id));
	box.setAttribute('data-state', r.state);
	box.setAttribute('data-to', String(r.to_version));
	box.setAttribute('data-stage', String(r.stage));
	const parts = [
		el('p', {}, 'rollout ', el('strong', {}, '#' + r.id), ': version ', String(r.from_version), ' \u2192 ',
			String(r.to_version), ' ', el('span', { class: 'ro-state ' + r.state }, r.state.replace('_', ' ')),
			r.revert_version ? ' (reverted by version ' + r.revert_version + ')' : ''),
	];
	if (r.reason)
		parts.push(el('p', { class: 'reason' }, r.reason));
	if (r.frozen && r.state === 'in_progress')
		parts.push(el('p', { class: 'reason frozen' }, r.frozen));
	// per stage, as the plane counts them: members ACKed (healthy),
	// unhealthy, NACKed, pending
	const stages = r.stages || [r.stage];
	const counts = r.stage_counts || [];
	stages.forEach((pct, i) => {
		const c = counts[i] || { members: 0, reached: false, acked: 0, unhealthy: 0, nacked: 0, pending: 0 };
		const inStage = c.members;
		const w = (x) => (inStage ? (100 * x) / inStage : 0) + '%';
		const bar = el('div', { class: 'bar' });
		const seg = (cls, x) => {
			const s = el('span', { class: cls, title: cls + ': ' + x });
			s.style.width = w(x);   // CSSOM, not an inline style attribute
			return s;
		};
		bar.append(seg('acked', c.acked), seg('unhealthy', c.unhealthy), seg('nacked', c.nacked),
			seg('pending', c.pending));
		parts.push(el('div', { class: 'stage' + (i + 1 === r.stage_index ? ' current' : ''),
			'data-stage': String(pct), 'data-acked': String(c.acked + c.unhealthy), 'data-nacked': String(c.nacked),
			'data-pending': String(c.pending) },
			el('div', { class: 'name' }, 'stage ' + (i + 1) + ': ' + pct + '% (' + inStage + ' nodes) \u2014 ' +
				(c.reached ? (c.acked + c.unhealthy) + ' ACKed, ' + c.acked + ' healthy, ' +
					(c.nacked ? c.nacked + ' NACKed, ' : '') + c.pending + ' pending' : 'not reached')),
			bar));
	});
	if (r.gate)
		parts.push(renderGate(r.gate));
	box.replaceChildren(...parts);
}

// The traffic gates: per stage judged, its verdict and, per route, the
// canary (the stage's nodes on the new version) against the baseline.
function pct(x) {
	return (100 * (x || 0)).toFixed(2) + '%';
}

function renderGate(g) {
	const limits = [];
	if (g.error_rate)
		limits.push('5xx rate ' + g.error_rate);
	if (g.latency_p99)
		limits.push('p99 ' + g.latency_p99);
	const box = el('div', { class: 'gate' },
		el('p', { class: 'gate-limits' }, 'gates: ' + limits.join(', ') + ', at least ' + g.min_requests +
			' requests per route and node'));
	for (const st of g.stages || []) {
		const head = el('p', { class: 'gate-stage ' + st.verdict },
			'stage ' + st.stage + ' (' + st.percent + '%): ', el('strong', {}, st.verdict.replace('_', ' ')),
			st.reason ? ' \u2014 ' + st.reason : '',
			st.baseline_stage ? ' (baseline kept from stage ' + st.baseline_stage + ')' : '');
		const routes = st.routes || [];
		const rows = routes.map((rt) => {
			const side = (s) => [el('td', {}, String(s.requests)), el('td', {}, pct(s.error_rate)),
				el('td', {}, s.p99.toFixed(1) + ' ms')];
			return el('tr', { 'data-route': rt.route, title: rt.note || '' },
				el('td', {}, rt.route, rt.note ? el('span', { class: 'note' }, ' *') : ''),
				...side(rt.canary), ...side(rt.baseline));
		});
		// every route's side merges the same nodes over the same window
		const who = (s) => s.nodes + (s.nodes === 1 ? ' node, ' : ' nodes, ') + s.window.toFixed(1) + ' s';
		const table = rows.length ? el('table', { class: 'gate-table' },
			el('thead', {},
				el('tr', {}, el('th', {}, ''), el('th', { colspan: '3' }, 'canary (' + who(routes[0].canary) + ')'),
					el('th', { colspan: '3' }, 'baseline (' + who(routes[0].baseline) + ')')),
				el('tr', {}, el('th', {}, 'route'), el('th', {}, 'requests'), el('th', {}, '5xx'), el('th', {}, 'p99'),
					el('th', {}, 'requests'), el('th', {}, '5xx'), el('th', {}, 'p99'))),
			el('tbody', {}, ...rows)) : el('p', { class: 'none' }, 'no traffic reported yet');
		const notes = routes.filter((rt) => rt.note).map((rt) => el('p', { class: 'note' }, '* ' + rt.route + ': ' + rt.note));
		// held unjudged: members that do not count traffic (the reason names them)
		box.append(el('div', { 'data-gate-stage': String(st.stage), 'data-verdict': st.verdict,
			'data-held': st.held ? 'true' : 'false' }, head, table, ...notes));
	}
	return box;
}

function renderHistory() {
	const list = $('history');
	if (state.history && state.history.length) {
		list.replaceChildren(...state.history.slice(0, 20).map((h) =>
			el('li', { 'data-version': String(h.version) }, el('strong', {}, 'version ' + h.version), ' ',
				h.author ? el('span', { class: 'author' }, 'by ' + h.author) : '', ' ',
				fmtTime(h.time || h.at || h.committed_at || h.created), h.message ? ' \u2014 ' + h.message : '',
				historyNames(h).length ? ' (' + historyNames(h).slice(0, 10).join(', ') + ')' : '',
				historyOverride(h),
				approvalText(h) ? el('span', { class: 'approvals' }, ' \u2014 ' + approvalText(h)) : '',
				revertButtons(h.version))));
		return;
	}
	const seen = state.seen.slice(0, 20);
	if (!seen.length) {
		list.replaceChildren(el('li', { class: 'none' }, state.history === null ?
			'no history on this plane yet; versions appear here as they commit' : 'none'));
		return;
	}
	list.replaceChildren(...seen.map((v) => el('li', { 'data-version': String(v.version) },
		el('strong', {}, 'version ' + v.version), ' ', fmtTime(v.time), ' ', (v.names || []).join(', '),
		revertButtons(v.version))));
}

// ---- revert ----------------------------------------------------------------
// A version's buttons: "revert" (its state as a new version, rolled out
// as any write) and "revert now" (the same sent to every node at once: no
// stages, no bakes; POST /v1/revert {"version":V,"now":true}). Both ask
// first; a console session only reads, so the form takes an operator's or
// admin's token for this one request (never kept).
let revertTarget = null;   // {version, now} while the form asks

function revertButtons(v) {
	const b = (cls, text, now, title) => {
		const x = el('button', { type: 'button', class: cls, 'data-version': String(v), title }, text);
		x.addEventListener('click', () => askRevert(v, now));
		return x;
	};
	return el('span', { class: 'revert-buttons' },
		b('revert', 'revert', false, 'commit the state of version ' + v + ' as a new version, rolled out as any write'),
		b('revert-now', 'revert now', true, 'the same, sent to every node at once: no stages, no bakes (an emergency)'));
}

function askRevert(v, now) {
	revertTarget = { version: v, now };
	const f = $('revert-form');
	f.dataset.version = String(v);
	f.dataset.now = String(now);
	$('revert-what').textContent = now ?
		'Emergency revert to version ' + v + ': its state as a new version, sent to every node at once (no stages, ' +
		'no bakes). Nodes still check, verify and ACK it.' :
		'Revert to version ' + v + ': its state as a new version, rolled out as any write.';
	$('revert-confirm').textContent = now ? 'Revert now' : 'Revert';
	f.hidden = false;
	$('revert-result').hidden = true;
	$('revert-message').focus();
}

async function doRevert(e) {
	e.preventDefault();
	const t = revertTarget;
	if (!t)
		return;
	const body = { version: t.version };
	if (t.now)
		body.now = true;
	const msg = $('revert-message').value.trim();
	if (msg)
		body.message = msg;
	const token = $('revert-token').value.trim() || state.token;
	$('revert-token').value = '';   // for this request only
	const h = { 'Content-Type': 'application/json' };
	if (token)
		h.Authorization = 'Bearer ' + token;
	let status = 0, text;
	try {
		const r = await fetch('/v1/revert', { method: 'POST', headers: h, body: JSON.stringify(body), cache: 'no-store',
			credentials: 'omit' });
		status = r.status;
		const j = await r.json().catch(() => ({}));
		if (r.ok)
			text = 'version ' + j.version + ': the state of version ' + t.version +
				(t.now ? ', sent to every node now' : ', rolled out as any write');
		else if (r.status === 401 || r.status === 403)
			text = 'refused: ' + (j.error || 'HTTP ' + r.status) + ' \u2014 a revert needs an operator or admin token: give one above';
		else
			text = 'refused: ' + (j.error || 'HTTP ' + r.status);
	} catch (err) {
		text = 'cannot reach the plane: ' + err.message;
	}
	const ok = status >= 200 && status < 300;
	const res = $('revert-result');
	res.hidden = false;
	res.textContent = text;
	res.dataset.status = String(status);
	res.className = ok ? 'ok' : 'error';
	if (ok) {
		$('revert-form').hidden = true;
		$('revert-message').value = '';
		revertTarget = null;
	}
}

function logEvent(type, id, data) {
	let text = type;
	switch (type) {
	case 'version': text = 'version ' + data.version + ': ' + (data.names || []).join(', '); break;
	case 'ack': text = data.node + ' ACKed ' + data.version; break;
	case 'nack': text = data.node + ' NACKed ' + data.version + ': ' + data.error; break;
	case 'held': text = data.node + ' held at ' + data.version + ': ' + data.reason; break;
	case 'key': text = data.node + ' key ' + data.key_id + ' ' + data.what; break;
	case 'rollout': text = 'rollout #' + data.id + ' ' + data.state + ' at stage ' + data.stage + '% (' +
		data.from_version + ' \u2192 ' + data.to_version + ')' + (data.reason ? ': ' + data.reason : ''); break;
	case 'node': text = data.node + (data.connected ? ' connected' : ' disconnected'); break;
	case 'gate': text = 'rollout #' + data.rollout + ' stage ' + data.stage + ' (' + data.percent + '%) ' +
		data.verdict + (data.reason ? ': ' + data.reason : ''); break;
	case 'plane': text = data.current ? 'this plane is current again' :
		'this plane is stale: ' + ((data.stale && data.stale.why) || '?'); break;
	case 'reset': text = 'missed events: reloaded'; break;
	case 'freeze': text = 'frozen until ' + new Date(data.until * 1000).toISOString().replace('.000Z', 'Z') +
		' by ' + data.by + ': ' + data.message; break;
	case 'thaw': text = 'the freeze by ' + data.by + ' ended (' + data.ended + ')'; break;
	case 'freeze_passed': text = 'version ' + data.version + ' by ' + data.by + ' passed the freeze: ' + data.reason;
		break;
	}
	const list = $('events');
	list.prepend(el('li', { class: type, 'data-id': id || '' }, new Date().toLocaleTimeString() + ' ' + text));
	while (list.children.length > 200)
		list.lastChild.remove();
}

function renderAll() {
	renderVersion();
	renderStale();
	renderFreeze();
	renderNodes();
	renderRollout();
	renderHistory();
}

// ---- snapshot --------------------------------------------------------------

async function loadNodes() {
	const nodes = await getJSON('/v1/nodes');
	state.nodes = new Map((nodes || []).map((n) => [n.node, n]));
}

async function loadRollout() {
	state.rollout = await getJSON('/v1/rollouts/current');
}

// /v1/history is optional: absent (404), refused or broken, the panel
// lists the versions seen on the stream instead
async function loadHistory() {
	try {
		const h = await getJSON('/v1/history?limit=20');
		state.history = h === null ? null : Array.isArray(h) ? h : (h.versions || h.history || []);
	} catch (e) {
		state.history = null;
	}
}

// A version's override of the guards: its reason and the guards it passed.
function historyOverride(h) {
	const o = h.override;
	if (!o || typeof o !== 'object')
		return '';
	const passed = Array.isArray(o.passed) && o.passed.length ? o.passed.join(', ') : 'no guard crossed';
	return el('span', { class: 'override' }, ' override: ' + (o.reason || '') + ' (passed ' + passed + ')');
}

// A version's approvals (docs/protocol.md, "Approvals"): "pending approval
// 1/2 (1a2b3c4d...)" or "approved 2/2 (...)"; '' when no node requires them.
function approvalText(h) {
	if (!Array.isArray(h.approvals))
		return '';
	const per = new Map();
	for (const a of h.approvals)
		per.set(a.sub, (per.get(a.sub) || []).concat([a.kid]));
	let kids = [];
	for (const k of per.values())
		if (k.length > kids.length)
			kids = k;
	const need = h.approvals_needed || 0;
	const who = kids.length ? ' (' + kids.map((k) => String(k).slice(0, 8) + '\u2026').join(', ') + ')' : '';
	if (need && kids.length < need)
		return 'pending approval ' + kids.length + '/' + need + who;
	return kids.length ? 'approved ' + kids.length + '/' + (need || kids.length) + who : '';
}

function historyNames(h) {
	const list = Array.isArray(h.names) ? h.names : Array.isArray(h.changes) ? h.changes : [];
	return list.map((c) => (typeof c === 'string' ? c : c && c.name)).filter(Boolean);
}

async function loadSnapshot() {
	await Promise.all([loadStatus(), loadNodes(), loadRollout(), loadHistory()]);
	renderAll();
}

// Events change the page at once; the records behind them (lag, targets)
// are read again shortly after, once for a burst.
let refreshTimer = null;
function refreshSoon() {
	if (refreshTimer)
		return;
	refreshTimer = setTimeout(async () => {
		refreshTimer = null;
		try {
			await Promise.all([loadStatus(), loadNodes(), loadRollout()]);
			renderVersion();
			renderStale();
			renderNodes();
			renderRollout();
		} catch (e) {
			if (e instanceof AuthError)
				askToken(e.message);
		}
	}, 300);
}

// ---- the event stream ------------------------------------------------------

function onEvent(type, id, raw) {
	let data = {};
	try {
		data = raw ? JSON.parse(raw) : {};
	} catch (e) {
		return;
	}
	if (id)
		state.lastId = id;
	if (type === 'heartbeat') {
		$('live').className = 'live';
		return;
	}
	logEvent(type, id, data);
	switch (type) {
	case 'version':
		if (data.version > state.version)
			state.version = data.version;
		state.seen.unshift({ version: data.version, names: data.names, time: data.time });
		state.seen.length = Math.min(state.seen.length, 50);
		renderVersion();
		loadHistory().then(renderHistory, () => {});
		if (state.history === null)
			renderHistory();
		break;
	case 'ack': {
		const n = state.nodes.get(data.node);
		if (n) {
			n.acked_version = data.version;
			if (data.healthy !== undefined)
				n.healthy = data.healthy;
		}
		renderNodes();
		break;
	}
	case 'held': {
		const n = state.nodes.get(data.node);
		if (n)
			n.held = { version: data.version, reason: data.reason, time: data.time };
		renderNodes();
		break;
	}
	case 'nack': {
		const n = state.nodes.get(data.node);
		if (n)
			n.last_nack = { version: data.version, error: data.error, time: data.time };
		renderNodes();   // its NACK is shown from its record: counted and listed alike
		break;
	}
	case 'rollout':
		state.rollout = data;
		if (data.revert_version > state.version) {   // a revert commits a version too
			state.version = data.revert_version;
			renderVersion();
		}
		renderRollout();
		break;
	case 'node': {
		const n = state.nodes.get(data.node);
		if (n)
			n.connected = data.connected;
		renderNodes();
		break;
	}
	case 'plane':
		state.stale = data.current ? null : data.stale || null;
		renderStale();
		break;
	case 'freeze':
		state.freeze = data;
		renderFreeze();
		break;
	case 'thaw':
		state.freeze = null;
		renderFreeze();
		loadStatus().then(renderFreeze).catch(() => {});   // a new one may have replaced it
		break;
	case 'reset':
		loadSnapshot().catch(() => {});
		return;
	}
	refreshSoon();
}

// WHATWG SSE parsing, enough for the plane's streams: event, id, data.
async function follow() {
	for (;;) {
		try {
			const h = headers();
			h.Accept = 'text/event-stream';
			if (state.lastId)
				h['Last-Event-ID'] = state.lastId;
			const r = await fetch('/v1/events', { headers: h, cache: 'no-store', credentials: 'omit' });
			if (r.status === 401 || r.status === 403) {
				state.started = false;
				askToken(await refusal(r));   // an expired session says so
				return;
			}
			if (!r.ok || !r.body)
				throw new Error('HTTP ' + r.status);
			$('live').className = 'live';
			$('live').textContent = 'live';
			const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
			let text = '';
			let ev = { type: '', id: '', data: [] };
			for (;;) {
				const { value, done } = await reader.read();
				if (done)
					break;
				text += value;
				let nl;
				while ((nl = text.search(/\r\n|\r|\n/)) >= 0) {
					const line = text.slice(0, nl);
					text = text.slice(nl + (text.startsWith('\r\n', nl) ? 2 : 1));
					if (line === '') {
						if (ev.data.length)
							onEvent(ev.type || 'message', ev.id, ev.data.join('\n'));
						ev = { type: '', id: '', data: [] };
						continue;
					}
					if (line.startsWith(':'))
						continue;
					const c = line.indexOf(':');
					const field = c < 0 ? line : line.slice(0, c);
					let val = c < 0 ? '' : line.slice(c + 1);
					if (val.startsWith(' '))
						val = val.slice(1);
					if (field === 'event')
						ev.type = val;
					else if (field === 'data')
						ev.data.push(val);
					else if (field === 'id')
						ev.id = val;
				}
			}
		} catch (e) {
			// fall through: reconnect
		}
		$('live').className = 'live off';
		$('live').textContent = 'reconnecting';
		await new Promise((res) => setTimeout(res, 2000));
		// the stream resumes from the last id; the records may have moved
		refreshSoon();
	}
}

// ---- token -----------------------------------------------------------------

function askToken(why) {
	$('login').hidden = false;
	$('logout').hidden = true;
	$('login-error').textContent = why || '';
	$('token').focus();
}

async function start() {
	try {
		await loadSnapshot();
	} catch (e) {
		if (e instanceof AuthError) {
			askToken(state.token ? e.message : '');
			return;
		}
		$('login-error').textContent = e.message;
		setTimeout(start, 2000);
		return;
	}
	$('login').hidden = true;
	$('logout').hidden = !state.token;
	$('app').hidden = false;
	if (!state.started) {
		state.started = true;
		follow();
	}
	// lag and "lagging" move with time, not only with events
	if (!state.timer)
		state.timer = setInterval(refreshSoon, 10000);
}

document.addEventListener('DOMContentLoaded', () => {
	tokenFromLink();
	$('revert-form').addEventListener('submit', doRevert);
	$('revert-cancel').addEventListener('click', () => {
		$('revert-form').hidden = true;
		revertTarget = null;
	});
	$('login').addEventListener('submit', (e) => {
		e.preventDefault();
		state.token = $('token').value.trim();
		$('token').value = '';
		sessionStorage.setItem(KEY, state.token);
		start();
	});
	$('logout').addEventListener('click', () => {
		sessionStorage.removeItem(KEY);
		location.reload();
	});
	$('filter').addEventListener('input', () => {
		state.filter = parseFilter($('filter').value);
		renderNodes();
	});
	start();
});
