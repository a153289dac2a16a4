// freeze-banner.cjs PLANE_URL MESSAGE: drives the console (GET /ui/) of an
// --insecure plane in headless chromium through puppeteer-core (NODE_PATH;
// the browser is $CHROMIUM, default /usr/bin/chromium) while a freeze
// holds: the banner must show MESSAGE from the first load; then, from
// inside the page, the freeze is ended (DELETE /v1/freeze) and the banner
// must go with no reload (the thaw event); a new freeze of 3 s (PUT) must
// bring it back (the freeze event) and its end by time take it away.
// Prints one JSON object of what it saw; exits 1 on a failure to drive.
'use strict';
const puppeteer = require('puppeteer-core');

const [base, message] = process.argv.slice(2);
const res = { page_errors: [] };
const out = () => process.stdout.write(JSON.stringify(res) + '\n');
const banner = () => {
	const b = document.getElementById('freeze');
	return b && !b.hidden ? b.textContent : null;
};

(async () => {
	const browser = await puppeteer.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
	});
	try {
		const page = await browser.newPage();
		page.on('pageerror', (e) => res.page_errors.push(String(e.message || e)));
		await page.goto(base + '/ui/', { waitUntil: 'domcontentloaded' });
		await page.waitForSelector('#app:not([hidden])', { timeout: 10000 });
		await page.waitForFunction(() => document.getElementById('live').textContent === 'live', { timeout: 10000 });
		await page.waitForFunction((m) => {
			const b = document.getElementById('freeze');
			return b && !b.hidden && b.textContent.includes(m);
		}, { timeout: 10000 }, message);
		res.shown_at_load = await page.evaluate(banner);

		res.delete_status = await page.evaluate(async () => (await fetch('/v1/freeze', { method: 'DELETE' })).status);
		await page.waitForFunction(() => document.getElementById('freeze').hidden, { timeout: 10000 });
		res.hidden_after_off = true;

		res.put_status = await page.evaluate(async () => (await fetch('/v1/freeze', {
			method: 'PUT', headers: { 'Content-Type': 'application/json' },
			body: JSON.stringify({ until: Math.floor(Date.now() / 1000) + 3, message: 'three seconds' }),
		})).status);
		await page.waitForFunction(() => {
			const b = document.getElementById('freeze');
			return !b.hidden && b.textContent.includes('three seconds');
		}, { timeout: 10000 });
		res.shown_after_put = await page.evaluate(banner);
		await page.waitForFunction(() => document.getElementById('freeze').hidden, { timeout: 20000 });
		res.hidden_after_time = true;
		res.log = await page.$$eval('#events li', (l) => l.map((x) => x.textContent).slice(0, 10));
		out();
	} catch (e) {
		res.error = String(e.message || e);
		out();
		process.exitCode = 1;
	} finally {
		await browser.close();
	}
})();
