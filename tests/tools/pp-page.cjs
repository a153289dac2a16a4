// pp-page.cjs: how the console tools drive a browser: run(res, body)
// starts headless chromium ($CHROMIUM, else /usr/bin/chromium) through
// puppeteer-core (NODE_PATH), calls body(page) with one page whose script
// errors land in res.page_errors, then prints res as one JSON line (with
// res.error and exit code 1 when anything failed) and closes the browser.
'use strict';
const puppeteer = require('puppeteer-core');

exports.run = (res, body) => (async () => {
	let browser = null;
	try {
		browser = await puppeteer.launch({
			executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
			headless: true,
			args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
		});
		const page = await browser.newPage();
		page.on('pageerror', (e) => res.page_errors.push(String(e.message || e)));
		await body(page);
	} catch (e) {
		res.error = String(e.message || e);
		process.exitCode = 1;
	} finally {
		process.stdout.write(JSON.stringify(res) + '\n');
		if (browser)
			await browser.close();
	}
})();
