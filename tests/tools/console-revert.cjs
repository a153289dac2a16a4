// console-revert.cjs LINK OPERATOR_TOKEN VERSION: drives the history
// panel's revert buttons of the console (opened from a 'tetherctl ui'
// link: a read-only session) in headless chromium through puppeteer-core
// (NODE_PATH; the browser is $CHROMIUM), recording what the page POSTs to
// /v1/revert:
//   1. "revert" on VERSION, confirmed with the page's own (reader) token;
//   2. "revert now" on VERSION, confirmed with the page's own token;
//   3. the same form again, OPERATOR_TOKEN typed into it, with a message.
// Prints one JSON object of what it saw; exits 1 on a failure to drive.
'use strict';
const ppPage = require('./pp-page.cjs');

const [link, operator, version] = process.argv.slice(2);
const res = { page_errors: [], posts: [], steps: [] };
const timeout = 15000;

// Confirms the open form and waits for its answer; returns what it shows.
async function confirm(page) {
	const before = await page.$eval('#revert-result', (e) => e.dataset.seq || '0');
	await page.evaluate(() => {
		const r = document.getElementById('revert-result');
		r.dataset.seq = String(Number(r.dataset.seq || '0') + 1);
		r.hidden = true;
	});
	await page.click('#revert-confirm');
	await page.waitForFunction(() => !document.getElementById('revert-result').hidden, { timeout });
	return page.evaluate((b) => ({
		status: Number(document.getElementById('revert-result').dataset.status),
		text: document.getElementById('revert-result').textContent,
		form_hidden: document.getElementById('revert-form').hidden,
		seq: b,
	}), before);
}

ppPage.run(res, async (page) => {
	page.on('request', (r) => {
		if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/revert')
			res.posts.push(r.postData() || '');
	});
	await page.setViewport({ width: 1400, height: 900 });
	await page.goto(link, { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#app:not([hidden])', { timeout });
	const sel = (cls) => `#history li[data-version="${version}"] button.${cls}`;
	await page.waitForSelector(sel('revert-now'), { timeout });

	// 1. revert (staged), with the session's token
	await page.click(sel('revert'));
	res.form_revert = await page.evaluate(() => ({
		shown: !document.getElementById('revert-form').hidden,
		now: document.getElementById('revert-form').dataset.now,
		what: document.getElementById('revert-what').textContent,
	}));
	res.steps.push(await confirm(page));
	await page.click('#revert-cancel');

	// 2. revert now, with the session's token
	await page.click(sel('revert-now'));
	res.form_now = await page.evaluate(() => ({
		shown: !document.getElementById('revert-form').hidden,
		now: document.getElementById('revert-form').dataset.now,
		what: document.getElementById('revert-what').textContent,
		button: document.getElementById('revert-confirm').textContent,
	}));
	res.steps.push(await confirm(page));

	// 3. the form stayed: an operator's token typed into it
	await page.type('#revert-token', operator);
	await page.type('#revert-message', 'console emergency');
	res.steps.push(await confirm(page));
	res.token_field_after = await page.$eval('#revert-token', (e) => e.value);
	// the typed token served that request only: the tab keeps its session
	res.stored_token_id = await page.evaluate(() => (sessionStorage.getItem('tether.token') || '').split('_')[1] || '');
});
