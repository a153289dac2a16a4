// console-history.cjs PLANE_URL [TIMEOUT_S]: opens the plane's console
// (GET /ui/; a plane run --insecure needs no token) in headless chromium
// through puppeteer-core, waits for the history panel to show a version's
// override of the guards (#history li .override), and prints one JSON
// line: the texts of the history's first entries and of the overrides.
'use strict';
const puppeteer = require('puppeteer-core');

const [base, timeoutArg] = process.argv.slice(2);
const timeout = (Number(timeoutArg) || 30) * 1000;
const res = { page_errors: [] };

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
		await page.waitForSelector('#app:not([hidden])', { timeout: 20000 });
		await page.waitForSelector('#history li .override', { timeout });
		res.history = await page.$$eval('#history li', (l) => l.map((x) => x.textContent).slice(0, 5));
		res.overrides = await page.$$eval('#history li .override', (l) => l.map((x) => x.textContent));
	} catch (e) {
		res.failure = String(e.message || e);
	} finally {
		await browser.close();
		process.stdout.write(JSON.stringify(res) + '\n');
	}
})();
