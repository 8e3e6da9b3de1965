// The browser test of serve's page (run by tests/e2e/serve_e2e_test.cpp against a running
// service): headless chromium driven by puppeteer-core loads the page, opens a slide, clicks a
// point, checks that k hit thumbnails with scores appear and that a filter narrows them, turns the
// heatmap on, opens a hit; then asks for the similar cases and slides of a slide (by patient and
// slide vector, and by mosaic voting), checks the ranked lists and opens slides from them; fails on
// any console error. Keeps screenshots: SCREENSHOT.png (patches), SCREENSHOT-cases.png and
// SCREENSHOT-similar.png.
//   NODE_PATH=.../web/npm/node_modules node browser_test.js URL CHROMIUM SCREENSHOT.png
'use strict';
const puppeteer = require('puppeteer-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [url, chromium, screenshot] = process.argv.slice(2);
if (!url || !chromium || !screenshot) {
  console.error('usage: browser_test.js URL CHROMIUM SCREENSHOT.png');
  process.exit(2);
}

function check(ok, what) {
  if (!ok) throw new Error('check failed: ' + what);
  console.log('ok: ' + what);
}

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: chromium, headless: true, userDataDir: profile,
    // --disable-webgl: without a GPU, Chromium emulates WebGL on the CPU (SwiftShader) and each
    // frame of OpenSeadragon's WebGL drawer took both cores for ~0.2 s; OpenSeadragon then uses
    // its canvas drawer, and a slide's tiles load in 1-2 s instead of 7-12 s.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--disable-webgl'],
  });
  const problems = [];
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1600, height: 1000 });
    // Guards against a hang only (a loaded machine may take long): every step waits for a state.
    page.setDefaultTimeout(300000);
    page.setDefaultNavigationTimeout(300000);
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`); });

    await page.goto(url, { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#slide-list li').length >= 4);
    check(true, 'the cohort list shows the slides');
    await page.waitForFunction(() => document.querySelectorAll('#slide-list img').length >= 4 &&
      [...document.querySelectorAll('#slide-list img')].every((i) => i.complete && i.naturalWidth > 0));
    check(true, 'every slide has a thumbnail');

    await page.click('#slide-list li[data-slide="c"]');
    await page.waitForFunction(() => document.getElementById('slide-title').textContent === 'c' &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded());
    check(true, 'slide c opens in the viewer with its tiles loaded');

    const box = await (await page.$('#viewer')).boundingBox();
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForFunction(() => document.querySelectorAll('#hits .hit').length === 12 &&
      [...document.querySelectorAll('#hits .hit img')].every((i) => i.complete && i.naturalWidth > 0));
    const scores = await page.$$eval('#hits .hit .score', (els) => els.map((e) => Number(e.textContent)));
    check(scores.length === 12 && scores.every((s) => Number.isFinite(s)), '12 hit thumbnails with scores');
    check(scores.every((s, i) => i === 0 || s <= scores[i - 1] + 1e-6), 'scores in decreasing order');
    const sitesBefore = await page.$$eval('#hits .hit .sub', (els) => els.map((e) => e.textContent));

    await page.type('#filter', 'site = colon');
    await page.click('#rerun');
    await page.waitForFunction(() => {
      const subs = [...document.querySelectorAll('#hits .hit .sub:last-child')].map((e) => e.textContent);
      return subs.length === 12 && subs.every((t) => t.includes('site: colon'));
    });
    check(true, 'the filter narrows the hits to site = colon');
    check(sitesBefore.some((t) => t.includes('site: lung')), 'before the filter some hits were lung');

    await page.click('#heatmap');
    await page.waitForSelector('canvas.heat');
    check(true, 'the heatmap overlay appears');

    await page.click('#hits .hit:nth-child(2)');
    await page.waitForFunction(() => document.querySelectorAll('.outline:not(.query)').length >= 1 &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded());
    check(true, 'a hit opens its slide at its place, outlined');
    await new Promise((r) => setTimeout(r, 500));
    await page.screenshot({ path: screenshot });
    check(fs.statSync(screenshot).size > 10000, 'screenshot ' + screenshot);

    // Similar cases of slide c (patient P2) by patient vector: the other two patients, each with
    // its slides' thumbnails; a thumbnail opens its slide.
    const loaded = (id) => document.getElementById('slide-title').textContent === id &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded();
    const thumbsLoaded = "[...document.querySelectorAll('#similar-list img')].every((i) => i.complete && i.naturalWidth > 0)";
    await page.click('#slide-list li[data-slide="c"]');
    await page.waitForFunction(loaded, {}, 'c');
    await page.click('#find-cases');
    await page.waitForFunction(`document.querySelectorAll('#similar-list li[data-patient]').length === 2 && ${thumbsLoaded}`);
    const cases = await page.$$eval('#similar-list li', (els) => els.map((e) => e.dataset.patient));
    check(cases.length === 2 && !cases.includes('P2') && cases.includes('P1') && cases.includes('P3'),
      'similar cases of c by patient vector: P1 and P3, not its own patient (' + cases + ')');
    const caseSlides = await page.$$eval('#similar-list li[data-patient="P1"] figcaption', (els) => els.map((e) => e.textContent));
    const shot3 = screenshot.replace(/\.png$/, '') + '-cases.png';
    await page.screenshot({ path: shot3 });
    check(fs.statSync(shot3).size > 10000, 'screenshot ' + shot3);
    check(caseSlides.join(',') === 'a,b', 'patient P1 shows its slides a and b (' + caseSlides + ')');
    await page.click('#similar-list li[data-patient="P1"] img[data-open="b"]');
    await page.waitForFunction(loaded, {}, 'b');
    check(true, 'a slide thumbnail of a similar case opens that slide');

    // Similar slides of d by slide vector: the three others, ranked by score, with labels.
    await page.click('#slide-list li[data-slide="d"]');
    await page.waitForFunction(loaded, {}, 'd');
    await page.click('#find-slides');
    await page.waitForFunction(`document.querySelectorAll('#similar-list li[data-slide]').length === 3 && ${thumbsLoaded}`);
    const ranked = await page.$$eval('#similar-list li', (els) => els.map((e) => ({
      id: e.dataset.slide, score: Number(e.querySelector('.score').textContent), text: e.textContent })));
    check(ranked.every((r) => Number.isFinite(r.score)) && ranked.every((r, i) => i === 0 || r.score <= ranked[i - 1].score + 1e-6),
      '3 similar slides of d with decreasing scores');
    check(!ranked.some((r) => r.id === 'd') && ranked.every((r) => /site/.test(r.text)), 'other slides, with their labels');

    // By mosaic vote: votes, and the mosaic outlined on the slide.
    await page.select('#similar-method', 'vote');
    await page.waitForFunction(() => document.querySelectorAll('#similar-list li .measure').length >= 1 &&
      [...document.querySelectorAll('#similar-list li .measure')].every((m) => /vote/.test(m.textContent)) &&
      document.querySelectorAll('.outline.mosaic').length >= 1);
    const votes = await page.$$eval('#similar-list li .measure b', (els) => els.map((e) => Number(e.textContent)));
    check(votes.every((v, i) => v >= 1 && (i === 0 || v <= votes[i - 1])), 'slides of d ranked by votes: ' + votes);
    await page.waitForFunction(thumbsLoaded);
    await new Promise((r) => setTimeout(r, 500));
    const shot2 = screenshot.replace(/\.png$/, '') + '-similar.png';
    await page.screenshot({ path: shot2 });
    check(fs.statSync(shot2).size > 10000, 'screenshot ' + shot2);
    // A filter on the voting patches narrows the slides: only colon, and not d's own patient.
    await page.type('#similar-filter', 'site = colon');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => {
      const ids = [...document.querySelectorAll('#similar-list li[data-slide]')].map((e) => e.dataset.slide);
      return ids.length === 1 && ids[0] === 'b';
    });
    check(true, 'a filter on the voting patches leaves slide b (colon) alone');
    const first = ranked[0].id;
    await page.click('#similar-list li[data-slide]');
    await page.waitForFunction(() => document.getElementById('slide-title').textContent !== 'd' &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded());
    check(true, 'a ranked slide opens on click (first by score was ' + first + ')');
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  if (problems.length) {
    console.error('problems in the page:\n  ' + problems.join('\n  '));
    process.exit(1);
  }
  console.log('browser test passed');
})().catch((e) => { console.error(e); process.exit(1); });
