// console-check.cjs PLANE_URL READER_TOKEN ADMIN_TOKEN NACK_NODE SCREENSHOT [STOP_PID STOP_NODE]:
// drives the plane's console (GET /ui/) in headless chromium through
// puppeteer-core (NODE_PATH; the browser is $CHROMIUM, default
// /usr/bin/chromium). It enters the reader token, waits for the fleet,
// then -- from inside the page, so the clock is the page's -- writes a
// change NACK_NODE refuses (content "BAD") with the admin token and
// measures how long the page takes, with no reload, to show that node's
// NACK with its error (in the NACK panel: standing, or among the earlier
// NACKs once the node ACKed the rollout's revert) and the rollout of the
// new version with its stage.
// With STOP_PID, it then stops that agent (SIGTERM) and measures how long
// the page takes to show STOP_NODE offline.
// Prints one JSON object of what it saw; exits 1 on a failure to drive.
'use strict';
const puppeteer = require('puppeteer-core');

const [base, reader, admin, nackNode, shot, stopPid, stopNode] = process.argv.slice(2);
const res = { csp_violations: [], page_errors: [], console_errors: [] };
const out = () => process.stdout.write(JSON.stringify(res) + '\n');

(async () => {
	const browser = await puppeteer.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
	});
	try {
		const page = await browser.newPage();
		await page.setViewport({ width: 1280, height: 1000 });
		page.on('pageerror', (e) => res.page_errors.push(String(e.message || e)));
		page.on('console', (m) => { if (m.type() === 'error') res.console_errors.push(m.text()); });
		await page.evaluateOnNewDocument(() => {
			document.addEventListener('securitypolicyviolation', (e) => {
				(window.__csp = window.__csp || []).push(e.violatedDirective + ' ' + e.blockedURI);
			});
		});
		const resp = await page.goto(base + '/ui/', { waitUntil: 'domcontentloaded' });
		res.status = resp.status();
		res.csp = resp.headers()['content-security-policy'] || null;

		// a secure plane: the page asks for a token first
		await page.waitForSelector('#login:not([hidden])', { timeout: 10000 });
		res.login_shown = true;
		res.app_hidden_before_login = await page.$eval('#app', (e) => e.hidden);
		await page.type('#token', reader);
		await page.click('#login button[type=submit]');
		await page.waitForSelector('#app:not([hidden])', { timeout: 10000 });
		res.token_in_session = await page.evaluate(() => sessionStorage.getItem('tether.token') !== null);
		res.cookies = (await page.cookies()).length;

		// the fleet, every node synced, and the stream live
		await page.waitForFunction(() => {
			const rows = document.querySelectorAll('#nodes tbody tr');
			return rows.length >= 3 && [...rows].every((r) => r.dataset.state === 'synced');
		}, { timeout: 20000 });
		await page.waitForFunction(() => document.getElementById('live').textContent === 'live', { timeout: 10000 });
		res.nodes_before = await page.$$eval('#nodes tbody tr', (rows) => rows.map((r) => r.dataset.node + ':' + r.dataset.state));
		res.synced_count = await page.$eval('#n-synced', (e) => e.textContent);

		// filtering by labels
		await page.type('#filter', 'zone=b');
		res.filtered = await page.$$eval('#nodes tbody tr', (rows) => rows.map((r) => r.dataset.node));
		await page.$eval('#filter', (e) => { e.value = ''; e.dispatchEvent(new Event('input')); });

		// the change, written from inside the page; then the page is
		// watched (MutationObserver, the page's clock) for the NACK and
		// the rollout of the new version
		await page.evaluate(() => { window.__marker = 'same page'; });
		const t = await page.evaluate(async (token, node) => {
			const seen = {};
			const look = () => {
				const now = performance.now();
				const li = [...document.querySelectorAll('#nacks-panel li[data-node]')].find((l) => l.dataset.node === node &&
					window.__v && l.dataset.version === String(window.__v) &&
					/BAD content refused/.test(l.textContent));
				if (li && seen.nack === undefined)
					seen.nack = now;
				const ro = document.getElementById('rollout');
				if (window.__v && ro.dataset.to === String(window.__v) && ro.dataset.stage &&
				    ro.querySelector('.stage') && seen.rollout === undefined)
					seen.rollout = now;
			};
			const mo = new MutationObserver(look);
			mo.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
			const t0 = performance.now();
			const r = await fetch('/v1/resources/file/motd', {
				method: 'PUT', headers: { Authorization: 'Bearer ' + token },
				body: JSON.stringify({ path: 'motd.txt', content: 'BAD\n' }),
			});
			const j = await r.json();
			window.__v = j.version;
			look();
			const deadline = t0 + 5000;
			while ((seen.nack === undefined || seen.rollout === undefined) && performance.now() < deadline)
				await new Promise((ok) => setTimeout(ok, 20));
			mo.disconnect();
			return { version: j.version, put_status: r.status, nack_ms: seen.nack === undefined ? null : seen.nack - t0,
				rollout_ms: seen.rollout === undefined ? null : seen.rollout - t0 };
		}, admin, nackNode);
		Object.assign(res, t);
		res.nack_text = await page.$$eval('#nacks-panel li[data-node]', (l, node) => (l.find((x) => x.dataset.node === node) || {}).textContent || null, nackNode);
		res.rollout = await page.$eval('#rollout', (e) => ({ to: e.dataset.to, state: e.dataset.state, stage: e.dataset.stage,
			stages: [...e.querySelectorAll('.stage')].map((s) => s.dataset.stage + ':' + s.dataset.acked + '/' + s.dataset.pending),
			text: e.textContent }));
		res.node_row = await page.$$eval('#nodes tbody tr', (rows, node) => {
			const r = rows.find((x) => x.dataset.node === node);
			return r ? { state: r.dataset.state, last_nack: r.querySelector('td.err').textContent } : null;
		}, nackNode);
		res.same_page = await page.evaluate(() => window.__marker === 'same page');
		res.navigations = await page.evaluate(() => performance.getEntriesByType('navigation').length);
		res.csp_violations = await page.evaluate(() => window.__csp || []);
		res.history = await page.$$eval('#history li', (l) => l.map((x) => x.textContent).slice(0, 3));
		// the revert follows: the page shows the rollout ended
		await page.waitForFunction(() => ['rolled_back', 'aborted', 'completed'].includes(document.getElementById('rollout').dataset.state),
			{ timeout: 10000 }).catch(() => {});
		res.rollout_final = await page.$eval('#rollout', (e) => e.dataset.state);
		// and the records behind it settle: every node at its target again
		await page.waitForFunction(() => [...document.querySelectorAll('#nodes tbody tr')].every((r) =>
			r.dataset.state === 'synced' && r.cells[2].textContent === r.cells[3].textContent),
		{ timeout: 10000 }).catch(() => {});
		res.nodes_after = await page.$$eval('#nodes tbody tr', (rows) => rows.map((r) => r.dataset.node + ':' +
			r.dataset.state + '@' + r.cells[2].textContent + '/' + r.cells[3].textContent));
		res.version_shown = await page.$eval('#version', (e) => e.textContent);
		await page.screenshot({ path: shot, fullPage: true });
		res.screenshot = shot;

		if (stopPid) {
			const t0 = Date.now();
			process.kill(+stopPid, 'SIGTERM');
			await page.waitForFunction((node) => {
				const r = [...document.querySelectorAll('#nodes tbody tr')].find((x) => x.dataset.node === node);
				return r && r.dataset.state === 'offline';
			}, { timeout: 5000 }, stopNode).then(() => { res.offline_ms = Date.now() - t0; }, () => { res.offline_ms = null; });
			res.offline_count = await page.$eval('#n-offline', (e) => e.textContent);
			// still offline once the records are read again
			await new Promise((ok) => setTimeout(ok, 800));
			res.offline_after_refresh = await page.$$eval('#nodes tbody tr', (rows, node) =>
				(rows.find((x) => x.dataset.node === node) || { dataset: {} }).dataset.state, stopNode);
		}
	} finally {
		await browser.close();
	}
	out();
})().catch((e) => {
	res.failure = String(e && e.stack || e);
	out();
	process.exit(1);
});
