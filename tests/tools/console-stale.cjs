// console-stale.cjs PLANE_URL [TIMEOUT_S]: opens the plane's console (GET
// /ui/; a plane run --insecure needs no token) in headless chromium through
// puppeteer-core, prints "loaded" once the fleet shows, then waits for the
// stale banner (#stale) to show -- the page learns it from GET /v1/events's
// 'plane' event, with no reload -- and prints one JSON line: whether it
// showed, its text, and whether it went away again once the plane said it
// was current (it waits as long again for that).
'use strict';
const puppeteer = require('puppeteer-core');

const [base, timeoutArg] = process.argv.slice(2);
const timeout = (Number(timeoutArg) || 60) * 1000;
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
		process.stdout.write('loaded\n');
		await page.waitForSelector('#stale:not([hidden])', { timeout });
		res.shown = true;
		res.text = await page.$eval('#stale', (e) => e.textContent);
		await page.waitForSelector('#stale[hidden]', { timeout });
		res.cleared = true;
	} catch (e) {
		res.failure = String(e.message || e);
	} finally {
		await browser.close();
		process.stdout.write(JSON.stringify(res) + '\n');
	}
})();
