// The browser test of serve's page (run by tests/e2e/serve_e2e_test.cpp against a running
// service): headless chromium driven by puppeteer-core loads the page (its header, the notice of a
// built-in model, filter examples from the cohort), checks the toolbar at 1024 px, opens a slide,
// clicks a point, checks that k hit thumbnails with scores of other patients appear (the default),
// that a filter narrows them, that a filter matching nothing says why (the column's values, the
// nearest one) and that a syntax error marks its character and clears the hits; turns the heatmap
// on (its scale in numbers), opens a hit (ranked outlines, the clicked one marked, the scale bar);
// then asks for the similar cases and slides of a slide (by patient and slide vector, and by
// mosaic voting), checks the ranked lists and opens slides from them; fails on any console error
// or failed request but the one 400 it provokes. Keeps screenshots: SCREENSHOT.png (patches),
// SCREENSHOT-1024.png, SCREENSHOT-cases.png and SCREENSHOT-similar.png.
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
  let expect400 = false;  // while the test provokes a filter syntax error
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1600, height: 1000 });
    // Guards against a hang only (a loaded machine may take long): every step waits for a state.
    page.setDefaultTimeout(300000);
    page.setDefaultNavigationTimeout(300000);
    page.on('console', (m) => {
      if (m.type() === 'error' && !(expect400 && /status of 400/.test(m.text()))) problems.push('console: ' + m.text());
    });
    page.on('pageerror', (e) => problems.push('page error: ' + e.message));
    page.on('response', (r) => {
      if (r.status() >= 400 && !(expect400 && r.status() === 400 && /\/api\/v1\/search$/.test(r.url()))) {
        problems.push(`HTTP ${r.status()} ${r.url()}`);
      }
    });
    let tiles = [];  // [level, column, row] of each tile requested
    page.on('request', (r) => {
      const m = /_files\/(\d+)\/(\d+)_(\d+)\.jpeg$/.exec(r.url());
      if (m) tiles.push(m.slice(1).map(Number));
    });
    const text = (sel) => page.$eval(sel, (e) => e.textContent);
    const shown = (sel) => page.$eval(sel, (e) => !e.hidden && e.offsetHeight > 0);

    await page.goto(url, { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#slide-list li').length >= 4);
    check(true, 'the cohort list shows the slides');
    await page.waitForFunction(() => document.querySelectorAll('#slide-list img').length >= 4 &&
      [...document.querySelectorAll('#slide-list img')].every((i) => i.complete && i.naturalWidth > 0));
    check(true, 'every slide has a thumbnail');
    // The header in words, and the notice that a built-in model's weights are random.
    const header = await text('#index-info');
    check(/^vit-tiny · \d+ patches · 4 slides · 3 patients$/.test(header), 'a readable header: ' + header);
    check(await shown('#model-notice') && /random/i.test(await text('#model-notice')),
      'the notice of random weights is shown for the built-in model');
    const placeholder = await page.$eval('#filter', (e) => e.placeholder);
    check(placeholder === 'e.g. site = colon and tissue >= 0.5', 'the filter example is of this cohort: ' + placeholder);

    await page.click('#slide-list li[data-slide="c"]');
    await page.waitForFunction(() => document.getElementById('slide-title').textContent === 'c' &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded());
    check(true, 'slide c opens in the viewer with its tiles loaded');

    check(/^Click a point .* on c /.test(await text('#hint')), 'the hint names the open slide: ' + await text('#hint'));
    // Heatmap and "Search again" before any search say what to do first.
    await page.click('#rerun');
    await page.waitForFunction(() => !document.getElementById('note').hidden);
    check(/click a point/.test(await text('#note')), '"Search again" before a search says to click first');
    await page.click('#heatmap');
    await page.waitForFunction(() => /heatmap/i.test(document.getElementById('note').textContent));
    check(true, 'the heatmap before a search says to click first');
    await page.click('#heatmap');

    // At 1024 px the toolbar holds every control whole: none past the pane, none wrapped.
    await page.setViewport({ width: 1024, height: 768 });
    await page.waitForFunction(() => document.getElementById('viewer-pane').getBoundingClientRect().width < 600);
    const clipped = await page.evaluate(() => {
      const pane = document.getElementById('viewer-pane').getBoundingClientRect();
      const bar = document.getElementById('toolbar').getBoundingClientRect();
      const rowHeight = document.getElementById('mode-point').getBoundingClientRect().height;
      const out = [];
      for (const el of document.querySelectorAll('#toolbar button, #toolbar label, #slide-title')) {
        const r = el.getBoundingClientRect();
        if (r.left < pane.left || r.right > pane.right + 0.5 || r.bottom > bar.bottom + 0.5) out.push(el.textContent.trim() + ' outside');
        if (r.height > rowHeight + 2 || el.scrollWidth > el.clientWidth + 1) out.push(el.textContent.trim() + ' wrapped or cut');
      }
      return out;
    });
    check(clipped.length === 0, 'at 1024 px the toolbar clips nothing (' + clipped.join(', ') + ')');
    const shot1024 = screenshot.replace(/\.png$/, '') + '-1024.png';
    await page.screenshot({ path: shot1024 });
    await page.setViewport({ width: 1600, height: 1000 });

    // A click searches other patients by default: c is P2's only slide.
    check(await page.$eval('#exclude-patient', (e) => e.checked), '"Exclude same patient" is on by default');
    const box = await (await page.$('#viewer')).boundingBox();
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForFunction(() => document.querySelectorAll('#hits .hit').length === 12 &&
      [...document.querySelectorAll('#hits .hit img')].every((i) => i.complete && i.naturalWidth > 0));
    const scores = await page.$$eval('#hits .hit .score', (els) => els.map((e) => Number(e.textContent)));
    check(scores.length === 12 && scores.every((s) => Number.isFinite(s)), '12 hit thumbnails with scores');
    check(scores.every((s, i) => i === 0 || s <= scores[i - 1] + 1e-6), 'scores in decreasing order');
    const owners = await page.$$eval('#hits .hit .sub', (els) => els.map((e) => e.textContent.split(' · ')));
    check(owners.every(([slide, patient]) => slide !== 'c' && patient !== 'P2'),
      'every hit is of another patient than the query\'s (P2): ' + owners.map((o) => o.join('/')).join(' '));
    // A dragged box searches the mean of its patches.
    await page.click('#mode-box');
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.3);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.7, box.y + box.height * 0.7, { steps: 4 });
    await page.mouse.up();
    await page.waitForFunction(() => /Query box/.test(document.getElementById('query-card').textContent) &&
      document.querySelectorAll('#hits .hit').length === 12);
    check(/mean of \d+ patches/.test(await text('#query-card')) && await shown('.outline.query'),
      'a dragged box searches the mean of its patches, outlined: ' + await text('#query-card .muted'));
    await page.click('#mode-point');
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.waitForFunction(() => /Query patch/.test(document.getElementById('query-card').textContent));
    const labels = "[...document.querySelectorAll('#hits .hit')].map((h) => [...h.querySelectorAll('.label')].map((l) => l.textContent).join(';'))";
    const sitesBefore = await page.evaluate(labels);

    await page.type('#filter', 'site = colon');
    await page.click('#rerun');
    await page.waitForFunction(`(${labels}).length === 12 && (${labels}).every((t) => t.includes('site colon'))`);
    check(true, 'the filter narrows the hits to site = colon, labels shown whole');
    check(sitesBefore.some((t) => t.includes('site lung')), 'before the filter some hits were lung');

    // A filter that matches nothing says so, with the column's values and the nearest one.
    await page.$eval('#filter', (e) => { e.value = 'site = colun'; });
    await page.click('#rerun');
    await page.waitForFunction(() => document.querySelectorAll('#hits .hit').length === 0 &&
      !document.getElementById('note').hidden);
    const why = await text('#note');
    check(/No patch matches/.test(why) && /did you mean 'colon'/.test(why) && /'colon', 'lung'/.test(why),
      'an empty result explains itself: ' + JSON.stringify(why));

    // A syntax error: the marker under the character at fault, in monospace; no stale hits.
    await page.$eval('#filter', (e) => { e.value = 'site = colon'; });
    await page.click('#rerun');
    await page.waitForFunction(() => document.querySelectorAll('#hits .hit').length === 12);
    expect400 = true;
    await page.$eval('#filter', (e) => { e.value = 'site = = colon'; });
    await page.click('#rerun');
    await page.waitForSelector('#error pre.marker');
    const marker = await page.$eval('#error pre.marker', (e) => ({ lines: e.textContent.split('\n'), font: getComputedStyle(e).fontFamily }));
    check(/mono/i.test(marker.font), 'the marker is monospaced (' + marker.font + ')');
    check(marker.lines[0] === 'site = = colon' && marker.lines[1].indexOf('^') === 7,
      'the ^ stands under the second = (' + JSON.stringify(marker.lines) + ')');
    check(await page.$$eval('#hits .hit', (e) => e.length) === 0 && !/12/.test(await text('#hit-count')),
      'the previous hits are gone: ' + await text('#hit-count'));
    expect400 = false;
    await page.$eval('#filter', (e) => { e.value = 'site = colon'; });
    await page.click('#rerun');
    await page.waitForFunction(() => document.querySelectorAll('#hits .hit').length === 12);

    // The heatmap with its scale in numbers: the slide's lowest and highest score.
    const heat = page.waitForResponse((r) => /\/api\/v1\/heatmap$/.test(r.url()));
    await page.click('#heatmap');
    const h = await (await heat).json();
    await page.waitForSelector('canvas.heat');
    await page.waitForFunction(() => !document.getElementById('legend').hidden);
    const lo = Number(await text('#legend-lo')), hi = Number(await text('#legend-hi'));
    const digits = (await text('#legend-lo')).split('.')[1].length;
    check(Math.abs(lo - h.min) <= 0.5 * 10 ** -digits && Math.abs(hi - h.max) <= 0.5 * 10 ** -digits,
      `the heatmap's scale reads ${lo} to ${hi} (scores ${h.min} to ${h.max})`);
    const tiny = h.max - h.min < 0.05 * Math.max(Math.abs(h.min), Math.abs(h.max));
    check(await shown('#legend-note') === tiny && (!tiny || /tiny range/.test(await text('#legend-note'))),
      `the legend ${tiny ? 'says' : 'does not say'} that the scores span a tiny range`);

    // A hit opens its slide at its place: ranked outlines, the clicked one marked; the scale bar.
    const second = await page.$eval('#hits .hit:nth-child(2)', (e) => ({ id: e.dataset.patch, sub: e.querySelector('.sub').textContent }));
    tiles = [];
    await page.click('#hits .hit:nth-child(2)');
    await page.waitForFunction((slide) => document.getElementById('slide-title').textContent === slide &&
      document.querySelectorAll('.outline.selected').length === 1 &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded(), {}, second.sub.split(' · ')[0]);
    // The first view is the hit's region: no tile of the whole slide's view is fetched first.
    const outside = await page.evaluate((requested) => {
      const source = viewer.world.getItemAt(0).source;
      const view = viewer.viewport.viewportToImageRectangle(viewer.viewport.getBounds(true));
      return requested.filter(([level, col, row]) => {
        const scale = 2 ** (source.maxLevel - level), size = source.getTileWidth(level);
        const x = col * size * scale, y = row * size * scale, w = size * scale, h = size * scale;
        return x >= view.x + view.width || y >= view.y + view.height || x + w <= view.x || y + h <= view.y;
      });
    }, tiles);
    check(outside.length === 0, `the ${tiles.length} tiles fetched to open a hit all show its region ` +
      `(outside it: ${JSON.stringify(outside)})`);
    const tags = await page.$$eval('.outline:not(.query) .tag', (els) => els.map((e) => Number(e.textContent)));
    const ranksHere = await page.$$eval('#hits .hit', (els, slide) => els.filter((e) => e.querySelector('.sub').textContent.startsWith(slide + ' '))
      .map((e) => Number(e.querySelector('.cap .muted').textContent.slice(1))), second.sub.split(' · ')[0]);
    check(tags.length > 0 && tags.sort((a, b) => a - b).join() === ranksHere.sort((a, b) => a - b).join(),
      'the outlines on the slide carry the ranks of its hits: ' + tags);
    check(await page.$eval('.outline.selected .tag', (e) => e.textContent) === '2' &&
      await page.$eval('#hits .hit.selected', (e) => e.dataset.patch) === second.id, 'the clicked hit is marked, in the grid and on the slide');
    await new Promise((r) => setTimeout(r, 600));  // the scale bar follows the view's animation
    const scale = await page.evaluate(() => {
      const slide = state.cohort.get(state.slide);
      const el = document.getElementById('scale');
      const text = el.querySelector('.length').textContent;
      const um = Number(text.split(' ')[0]) * (/mm/.test(text) ? 1000 : 1);
      const vp = viewer.viewport;
      const a = vp.imageToViewerElementCoordinates(new OpenSeadragon.Point(0, 0));
      const b = vp.imageToViewerElementCoordinates(new OpenSeadragon.Point(um / slide.slide_mpp, 0));
      return { hidden: el.hidden, text, bar: el.querySelector('.bar').getBoundingClientRect().width, expected: b.x - a.x,
               mag: el.querySelector('.mag').textContent, expectedMag: 10 / (um / (b.x - a.x)) };
    });
    check(!scale.hidden && Math.abs(scale.bar - scale.expected) <= 1.5,
      `the scale bar (${scale.text}) is ${scale.bar.toFixed(1)} px, the slide's ${scale.expected.toFixed(1)} px`);
    check(Math.abs(parseFloat(scale.mag) - scale.expectedMag) <= 0.06 * scale.expectedMag, `magnification ${scale.mag} (${scale.expectedMag.toFixed(2)}×)`);
    await page.screenshot({ path: screenshot });
    check(fs.statSync(screenshot).size > 10000, 'screenshot ' + screenshot);

    // Similar cases of slide c (patient P2) by patient vector: the other two patients, each with
    // its slides' thumbnails; a thumbnail opens its slide.
    const loaded = (id) => document.getElementById('slide-title').textContent === id &&
      viewer.world.getItemCount() === 1 && viewer.world.getItemAt(0).getFullyLoaded();
    const thumbsLoaded = "[...document.querySelectorAll('#similar-list img')].every((i) => i.complete && i.naturalWidth > 0)";
    await page.click('#slide-list li[data-slide="c"]');
    await page.waitForFunction(loaded, {}, 'c');
    // The Cases tab has its own button, and its hint knows a slide is open.
    await page.click('#tab-cases');
    check(/Press "Find similar cases".* c\.$/.test(await text('#similar-hint')), 'the Cases tab says how to rank: ' + await text('#similar-hint'));
    await page.click('#similar-run');
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

    // By mosaic vote: votes, and the mosaic outlined on the slide. The hits of each voting patch
    // and the rows listed are two settings.
    check(!await shown('#vote-k-label'), 'no "hits per voting patch" for slide vectors');
    const voteBody = page.waitForRequest((r) => /\/api\/v1\/mosaic-vote$/.test(r.url()));
    await page.select('#similar-method', 'vote');
    const sent = JSON.parse((await voteBody).postData());
    check(await shown('#vote-k-label') && sent.k === Number(await page.$eval('#vote-k', (e) => e.value)) &&
      sent.top === Number(await page.$eval('#similar-k', (e) => e.value)) && sent.k !== sent.top,
      `mosaic voting sends its hits per patch (k ${sent.k}) apart from the rows listed (top ${sent.top})`);
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
