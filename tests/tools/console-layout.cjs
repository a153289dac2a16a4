// console-layout.cjs LINK ADMIN_TOKEN NACK_NODE OUT_DIR: opens the console
// from a 'tetherctl ui' link (PLANE/ui/#s=TOKEN) in headless chromium
// through puppeteer-core (NODE_PATH; the browser is $CHROMIUM) and
// measures it:
//   - the session from the link: the fleet shown, no login bar, the
//     fragment gone from the address bar, the token kept for the tab;
//   - the counts and the panels from one view: while NACK_NODE's NACK of
//     the newest version stands, and again once a good version (written
//     from the page with ADMIN_TOKEN) is ACKed by it, the counts equal the
//     node table's states and the NACK panel's entries;
//   - the layout at 1400x900 and 390x844: no horizontal scroll; at 1400 at
//     least two panels side by side, at 390 one column; nothing overlaps
//     the header; a PNG of each in OUT_DIR (console-1400.png, console-390.png).
// Prints one JSON object of what it saw; exits 1 on a failure to drive.
'use strict';
const ppPage = require('./pp-page.cjs');

const [link, admin, nackNode, outDir] = process.argv.slice(2);
const res = { page_errors: [] };
const timeout = 15000;

// In the page: the counts, the table's states and the NACK panel's entries.
function agreement() {
	const count = (id) => Number(document.getElementById('n-' + id).textContent);
	const rows = [...document.querySelectorAll('#nodes tbody tr')];
	const byState = (s) => rows.filter((r) => r.dataset.state === s).length;
	const states = ['synced', 'lagging', 'nacked', 'offline', 'stale'];
	return {
		counts: Object.fromEntries(states.map((s) => [s, count(s)])),
		rows: Object.fromEntries(states.map((s) => [s, byState(s)])),
		nacks: [...document.querySelectorAll('#nacks li.nack')].map((l) => l.dataset.node + '@' + l.dataset.version),
		before: [...document.querySelectorAll('#nacks-before li')].map((l) => l.dataset.node + '@' + l.dataset.version),
		nacks_none: !!document.querySelector('#nacks li.none'),
	};
}

// In the page: the layout's measures.
function layout() {
	const r = (e) => e.getBoundingClientRect();
	const header = r(document.querySelector('header'));
	const panels = [...document.querySelectorAll('main > section')].filter((s) => !s.hidden && r(s).width > 0)
		.map((s) => ({ id: s.id, left: r(s).left, right: r(s).right, top: r(s).top, bottom: r(s).bottom }));
	let sideBySide = 0;
	for (const a of panels)
		for (const b of panels)
			if (a !== b && a.right <= b.left + 1 && a.top < b.bottom && b.top < a.bottom)
				sideBySide++;
	// every element below the header starts under it (the header is not
	// sticky: at the top of the page nothing is drawn over it)
	const overlapping = [...document.querySelectorAll('main *, #stale, #freeze')]
		.filter((e) => r(e).height > 0 && r(e).top < header.bottom - 0.5)
		.map((e) => e.tagName + '#' + e.id).slice(0, 5);
	const lefts = [...new Set(panels.map((p) => Math.round(p.left)))];
	return {
		width: window.innerWidth, scroll_width: document.documentElement.scrollWidth,
		horizontal_scroll: document.documentElement.scrollWidth > window.innerWidth,
		panels: panels.length, side_by_side_pairs: sideBySide / 2, columns: lefts.length,
		header_bottom: header.bottom, overlapping,
	};
}

ppPage.run(res, async (page) => {
	await page.setViewport({ width: 1400, height: 900 });
	await page.goto(link, { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#app:not([hidden])', { timeout });
	await page.waitForFunction(() => document.getElementById('live').textContent === 'live', { timeout });
	res.login_hidden = await page.$eval('#login', (e) => e.hidden);
	res.hash_after = await page.evaluate(() => location.hash);
	res.url_has_token = await page.evaluate(() => /tt1_/.test(location.href));
	res.token_kept = await page.evaluate(() => /^tt1_/.test(sessionStorage.getItem('tether.token') || ''));

	// 1. the NACK stands: counted and listed alike
	await page.waitForFunction((node) => [...document.querySelectorAll('#nodes tbody tr')]
		.some((r) => r.dataset.node === node && r.dataset.state === 'nacked'), { timeout }, nackNode);
	res.nacked = await page.evaluate(agreement);

	// the layouts, with the NACK on screen
	res.wide = await page.evaluate(layout);
	await page.screenshot({ path: outDir + '/console-1400.png', fullPage: true });
	await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
	await page.waitForFunction(() => window.innerWidth === 390, { timeout });
	res.phone = await page.evaluate(layout);
	await page.screenshot({ path: outDir + '/console-390.png', fullPage: true });
	await page.setViewport({ width: 1400, height: 900 });

	// 2. a good version: the node ACKs it; its NACK is an earlier one now
	const v = await page.evaluate(async (token) => {
		const r = await fetch('/v1/resources/file/motd', {
			method: 'PUT', headers: { Authorization: 'Bearer ' + token },
			body: JSON.stringify({ path: 'motd.txt', content: 'good again\n' }),
		});
		return (await r.json()).version;
	}, admin);
	res.good_version = v;
	await page.waitForFunction((node, ver) => [...document.querySelectorAll('#nodes tbody tr')]
		.some((r) => r.dataset.node === node && r.dataset.state === 'synced' && r.cells[2].textContent === String(ver)),
	{ timeout }, nackNode, v);
	res.acked = await page.evaluate(agreement);
});
