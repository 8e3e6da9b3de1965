// tessera serve's page: a cohort list, an OpenSeadragon viewer over the service's DeepZoom tiles,
// search by a point or a box, the hits as a grid (ranked outlines on the slide), downloads; the
// heatmap and scale bar are in viewer_extras.js, the header, notices and filter help in explain.js,
// similar slides and cases of the open slide in similar.js.
'use strict';

const api = '/api/v1';
const state = { slides: [], slide: null, query: null, result: null, mode: 'point', overlays: [],
                heat: null, info: null, cohort: new Map(), selected: null };
const $ = (id) => document.getElementById(id);

function token() { return localStorage.getItem('tessera_token') || ''; }

async function call(path, body) {
  const headers = {};
  if (token()) headers.Authorization = 'Bearer ' + token();
  if (body) headers['Content-Type'] = 'application/json';
  const response = await fetch(api + path, { method: body ? 'POST' : 'GET', headers,
                                             body: body ? JSON.stringify(body) : undefined });
  if (response.status === 401) {
    const t = window.prompt('This service needs its access token:');
    if (t) {
      localStorage.setItem('tessera_token', t);
      document.cookie = 'tessera_token=' + encodeURIComponent(t) + '; path=/; SameSite=Strict';
      return call(path, body);
    }
  }
  const data = await response.json();
  if (!response.ok) throw new Error(data.error ? data.error.message : response.statusText);
  return data;
}

function status(text) { $('status').textContent = text; }
// An error of the service: its first line as text, the rest (a filter's text and the ^ under the
// character at fault) in a monospaced block, so the marker stands where the message says.
function showError(text) {
  const box = $('error');
  box.hidden = !text;
  box.replaceChildren();
  if (!text) return;
  const [first, ...rest] = String(text).split('\n');
  box.append(first);
  if (rest.length) {
    const pre = document.createElement('pre');
    pre.className = 'marker';
    pre.textContent = rest.map((l) => l.replace(/^ {2}/, '')).join('\n');
    box.appendChild(pre);
  }
}
function showNote(text) { $('note').hidden = !text; $('note').textContent = text || ''; }
function esc(s) { return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]); }
function slideUrl(id) { return api + '/slides/' + encodeURIComponent(id); }

// ---- cohort list --------------------------------------------------------------------------
async function loadSlides() {
  const q = $('slide-search').value.trim();
  const data = await call('/slides' + (q ? '?q=' + encodeURIComponent(q) : ''));
  state.slides = data.slides;
  $('slide-count').textContent = `${data.count} of ${data.total}`;
  const list = $('slide-list');
  list.replaceChildren();
  for (const s of data.slides) {
    const li = document.createElement('li');
    li.dataset.slide = s.slide_id;
    if (state.slide === s.slide_id) li.classList.add('active');
    const meta = Object.entries(s.metadata).map(([k, v]) => `${k}: ${v}`).join(' · ');
    li.innerHTML = `<img alt="" loading="lazy" src="${slideUrl(s.slide_id)}/thumbnail.jpeg">
      <div><div class="id">${esc(s.slide_id)}</div>
      <div class="meta">${esc(s.patient_id || 'no patient id')} · ${s.patches.toLocaleString()} patches</div>
      <div class="meta">${esc(meta)}</div></div>`;
    li.addEventListener('click', () => openSlide(s.slide_id));
    list.appendChild(li);
  }
}

// ---- viewer -------------------------------------------------------------------------------
const viewer = OpenSeadragon({
  id: 'viewer', prefixUrl: 'vendor/openseadragon/images/', showNavigator: true,
  navigatorPosition: 'TOP_RIGHT', crossOriginPolicy: false, loadTilesWithAjax: true,
  ajaxHeaders: token() ? { Authorization: 'Bearer ' + token() } : {},
  gestureSettingsMouse: { clickToZoom: false, dblClickToZoom: true }, animationTime: 0.4,
  maxZoomPixelRatio: 2, visibilityRatio: 0.5,
});

// Opens a slide; with `focus` ({x, y, size}) the first view is already the region around it, so
// that only the tiles of that view are fetched (not those of the whole slide first).
function openSlide(id, focus) {
  return new Promise((resolve) => {
    const done = () => {
      $('hint').textContent = `Click a point (or drag a box) on ${id} to find similar tissue in the other patients.`;
      onSlideOpened();
      drawOutlines();
      if ($('heatmap').checked) drawHeatmap();
      resolve();
    };
    if (state.slide === id && viewer.world.getItemCount() > 0) {
      if (focus) focusOn(focus, false);
      done();
      return;
    }
    state.slide = id;
    clearHeatmap();
    $('slide-title').textContent = id;
    for (const li of document.querySelectorAll('#slide-list li')) li.classList.toggle('active', li.dataset.slide === id);
    viewer.addOnceHandler('open', () => { if (focus) focusOn(focus, true); done(); });
    viewer.open(slideUrl(id) + '.dzi');
  });
}

function focusOn(f, immediately) {
  const pad = f.size * 3;
  const rect = viewer.viewport.imageToViewportRectangle(f.x - pad, f.y - pad, f.size + 2 * pad, f.size + 2 * pad);
  viewer.viewport.fitBounds(rect, immediately);
}

function addOutline(x, y, w, h, cls, tag) {
  const el = document.createElement('div');
  el.className = 'outline ' + (cls || '');
  if (tag !== undefined) {
    const label = document.createElement('span');
    label.className = 'tag';
    label.textContent = tag;
    el.appendChild(label);
  }
  viewer.addOverlay({ element: el, location: viewer.viewport.imageToViewportRectangle(x, y, w, h) });
  state.overlays.push(el);
}

// The hits of the open slide (amber, with their rank; the clicked one white), then the query's
// patch or box on top (blue); a hit that is the query patch itself is not drawn over it.
function drawOutlines() {
  for (const el of state.overlays) viewer.removeOverlay(el);
  state.overlays = [];
  drawMosaic();
  if (!state.result || $('view-patches').hidden) return;
  const q = state.result.query;
  for (const h of state.result.hits) {
    if (h.slide_id !== state.slide || h.patch_id === q.patch_id) continue;
    addOutline(h.x, h.y, h.footprint, h.footprint, h.patch_id === state.selected ? 'selected' : '', h.rank);
  }
  if (q.slide_id === state.slide && q.box) addOutline(q.box[0], q.box[1], q.box[2], q.box[3], 'query');
  else if (q.slide_id === state.slide && q.footprint) addOutline(q.x, q.y, q.footprint, q.footprint, 'query');
}

let press = null, boxEl = null;
viewer.addHandler('canvas-click', (e) => {
  if (!e.quick || state.mode !== 'point' || !state.slide) return;
  const p = viewer.viewport.viewerElementToImageCoordinates(e.position);
  search({ slide_id: state.slide, x: Math.round(p.x), y: Math.round(p.y) });
});
viewer.addHandler('canvas-press', (e) => {
  if (state.mode !== 'box' || !state.slide) return;
  press = viewer.viewport.viewerElementToImageCoordinates(e.position);
});
viewer.addHandler('canvas-drag', (e) => {
  if (state.mode !== 'box' || !press) return;
  e.preventDefaultAction = true;
  const p = viewer.viewport.viewerElementToImageCoordinates(e.position);
  const r = viewer.viewport.imageToViewportRectangle(Math.min(p.x, press.x), Math.min(p.y, press.y),
                                                     Math.abs(p.x - press.x), Math.abs(p.y - press.y));
  if (!boxEl) { boxEl = document.createElement('div'); boxEl.className = 'box-select'; viewer.addOverlay(boxEl, r); }
  else viewer.updateOverlay(boxEl, r);
});
viewer.addHandler('canvas-release', (e) => {
  if (state.mode !== 'box' || !press) return;
  const p = viewer.viewport.viewerElementToImageCoordinates(e.position);
  const box = [Math.round(Math.min(p.x, press.x)), Math.round(Math.min(p.y, press.y)),
               Math.round(Math.abs(p.x - press.x)), Math.round(Math.abs(p.y - press.y))];
  press = null;
  if (boxEl) { viewer.removeOverlay(boxEl); boxEl = null; }
  if (box[2] < 4 || box[3] < 4) return;
  search({ slide_id: state.slide, x: Math.round(box[0] + box[2] / 2), y: Math.round(box[1] + box[3] / 2), box });
});

function setMode(mode) {
  state.mode = mode;
  $('mode-point').classList.toggle('active', mode === 'point');
  $('mode-box').classList.toggle('active', mode === 'box');
  viewer.panHorizontal = viewer.panVertical = mode === 'point';
}

// ---- search -------------------------------------------------------------------------------
function searchBody(query) {
  const body = Object.assign({}, query, { k: Number($('k').value) });
  const filter = $('filter').value.trim();
  if (filter) body.filter = filter;
  if ($('exclude-patient').checked) body.exclude_same_patient = true;
  if ($('exclude-slide').checked) body.exclude_same_slide = true;
  return body;
}

async function search(query) {
  if ($('view-patches').hidden) showTab('patches');
  state.query = query;
  showError('');
  showNote('');
  status('searching…');
  try {
    const result = await call('/search', searchBody(query));
    state.result = result;
    state.selected = null;
    renderHits();
    drawOutlines();
    if ($('heatmap').checked) drawHeatmap();
    if (result.hits.length === 0 && result.filter) showNote(explainEmpty(result, state.cohort, state.info));
    status(`${result.hits.length} hits in ${result.latency_ms.toFixed(1)} ms`);
  } catch (err) {
    // No hits of an earlier search stay on screen as if they answered this one.
    state.result = null;
    renderHits();
    drawOutlines();
    showError(err.message);
    status('search failed');
  }
}

// The hits as labelled thumbnails; without a result (a failed search) none, and "no result".
function renderHits() {
  const r = state.result;
  const grid = $('hits');
  grid.replaceChildren();
  if (!r) {
    $('hit-count').textContent = 'no result';
    $('download-csv').disabled = $('download-json').disabled = true;
    return;
  }
  const q = r.query;
  $('hint').hidden = true;
  $('hit-count').textContent = `${r.hits.length} of k = ${r.k}`;
  const card = $('query-card');
  card.hidden = false;
  card.innerHTML = q.patch_id !== undefined
    ? `<img alt="query patch" src="${api}/patches/${q.patch_id}.jpeg"><div><b>Query patch</b>
       <div class="muted">${esc(q.slide_id)} · x ${q.x}, y ${q.y}</div></div>`
    : q.box ? `<div><b>Query box</b><div class="muted">${esc(q.slide_id)} · mean of ${q.patches} patches</div></div>`
    : '<div><b>Query</b> <span class="muted">a vector</span></div>';
  for (const h of r.hits) {
    const div = document.createElement('div');
    div.className = 'hit';
    div.dataset.patch = h.patch_id;
    const labels = Object.keys(h).filter((k) => !['rank', 'score', 'patch_id', 'slide_id', 'patient_id', 'x', 'y', 'tissue', 'shard', 'footprint'].includes(k))
      .map((k) => `<div class="label"><span class="muted">${esc(k)}</span> ${esc(h[k])}</div>`).join('');
    div.title = `patch ${h.patch_id} · ${h.slide_id} at (${h.x}, ${h.y}) · tissue ${h.tissue.toFixed(2)}`;
    div.innerHTML = `<img alt="patch ${h.patch_id}" loading="lazy" src="${api}/patches/${h.patch_id}.jpeg">
      <div class="cap"><span class="score">${h.score.toFixed(4)}</span> <span class="muted">#${h.rank}</span>
      <div class="sub">${esc(h.slide_id)} · ${esc(h.patient_id)}</div>${labels}</div>`;
    div.addEventListener('click', () => {
      state.selected = h.patch_id;
      for (const el of grid.children) el.classList.toggle('selected', el === div);
      openSlide(h.slide_id, { x: h.x, y: h.y, size: h.footprint });
    });
    grid.appendChild(div);
  }
  $('download-csv').disabled = $('download-json').disabled = r.hits.length === 0;
}

function download(name, type, text) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// The CSV rule of common/core/csv.h: quoted when a field holds , " CR LF or blanks at either end.
function csv(hits) {
  const cols = [...new Set(hits.flatMap((h) => Object.keys(h)))];
  const cell = (v) => { const s = v === null || v === undefined ? '' : String(v); return /[",\r\n]|^[ \t]|[ \t]$/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; };
  return [cols.map(cell).join(','), ...hits.map((h) => cols.map((c) => cell(h[c])).join(','))].join('\n') + '\n';
}

// ---- wiring -------------------------------------------------------------------------------
$('mode-point').addEventListener('click', () => setMode('point'));
$('mode-box').addEventListener('click', () => setMode('box'));
$('heatmap').addEventListener('change', (e) => (e.target.checked ? drawHeatmap() : clearHeatmap()));
$('search-form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (state.query) search(state.query);
  else showNote('Nothing to search again yet: click a point or drag a box on the slide first.');
});
$('download-json').addEventListener('click', () => download('tessera-hits.json', 'application/json', JSON.stringify(state.result, null, 2)));
$('download-csv').addEventListener('click', () => download('tessera-hits.csv', 'text/csv', csv(state.result.hits)));
let typing = null;
$('slide-search').addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(loadSlides, 200); });

(async () => {
  try {
    const info = await call('/info');
    state.info = info;
    for (const s of (await call('/slides')).slides) state.cohort.set(s.slide_id, s);
    const about = describeIndex(info, state.cohort);
    $('index-info').textContent = about.text;
    $('index-info').title = about.title;
    const notice = modelNotice(info);
    $('model-notice').hidden = !notice;
    $('model-notice').textContent = notice || '';
    const examples = filterExamples(info, state.cohort);
    $('filter').placeholder = examples.patches;
    $('similar-filter').placeholder = examples.vote;
    await loadSlides();
    if (state.slides.length) await openSlide(state.slides[0].slide_id);
    status('ready');
  } catch (err) {
    showError(err.message);
    status('not connected');
  }
})();
