// tessera serve's page: a cohort list, an OpenSeadragon viewer over the service's DeepZoom tiles,
// search by a point or a box, the hits as a grid, a similarity heatmap, downloads; similar slides
// and cases of the open slide are in similar.js.
'use strict';

const api = '/api/v1';
const state = { slides: [], slide: null, query: null, result: null, mode: 'point', overlays: [],
                heat: null, info: null, cohort: new Map() };
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
function showError(text) { $('error').hidden = !text; $('error').textContent = text || ''; }
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
  navigatorPosition: 'BOTTOM_LEFT', crossOriginPolicy: false, loadTilesWithAjax: true,
  ajaxHeaders: token() ? { Authorization: 'Bearer ' + token() } : {},
  gestureSettingsMouse: { clickToZoom: false, dblClickToZoom: true }, animationTime: 0.4,
  maxZoomPixelRatio: 2, visibilityRatio: 0.5,
});

function openSlide(id, focus) {
  return new Promise((resolve) => {
    const done = () => {
      if (focus) focusOn(focus);
      onSlideOpened();
      drawOutlines();
      if ($('heatmap').checked) drawHeatmap();
      resolve();
    };
    if (state.slide === id && viewer.world.getItemCount() > 0) { done(); return; }
    state.slide = id;
    clearHeatmap();
    $('slide-title').textContent = id;
    for (const li of document.querySelectorAll('#slide-list li')) li.classList.toggle('active', li.dataset.slide === id);
    viewer.addOnceHandler('open', done);
    viewer.open(slideUrl(id) + '.dzi');
  });
}

function focusOn(f) {
  const pad = f.size * 3;
  const rect = viewer.viewport.imageToViewportRectangle(f.x - pad, f.y - pad, f.size + 2 * pad, f.size + 2 * pad);
  viewer.viewport.fitBounds(rect, false);
}

function addOutline(x, y, w, h, cls) {
  const el = document.createElement('div');
  el.className = 'outline ' + (cls || '');
  viewer.addOverlay({ element: el, location: viewer.viewport.imageToViewportRectangle(x, y, w, h) });
  state.overlays.push(el);
}

// The query's patch (blue) and the hits of the open slide (amber).
function drawOutlines() {
  for (const el of state.overlays) viewer.removeOverlay(el);
  state.overlays = [];
  drawMosaic();
  if (!state.result || $('view-patches').hidden) return;
  const q = state.result.query;
  if (q.slide_id === state.slide && q.box) addOutline(q.box[0], q.box[1], q.box[2], q.box[3], 'query');
  else if (q.slide_id === state.slide && q.footprint) addOutline(q.x, q.y, q.footprint, q.footprint, 'query');
  for (const h of state.result.hits) {
    if (h.slide_id === state.slide) addOutline(h.x, h.y, h.footprint, h.footprint);
  }
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
  search({ slide_id: state.slide, x: box[0] + box[2] / 2, y: box[1] + box[3] / 2, box });
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
  status('searching…');
  try {
    const result = await call('/search', searchBody(query));
    state.result = result;
    renderHits();
    drawOutlines();
    if ($('heatmap').checked) drawHeatmap();
    status(`${result.hits.length} hits in ${result.latency_ms.toFixed(1)} ms`);
  } catch (err) {
    showError(err.message);
    status('search failed');
  }
}

function renderHits() {
  const r = state.result;
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
  const grid = $('hits');
  grid.replaceChildren();
  for (const h of r.hits) {
    const div = document.createElement('div');
    div.className = 'hit';
    div.dataset.patch = h.patch_id;
    const extra = Object.keys(h).filter((k) => !['rank', 'score', 'patch_id', 'slide_id', 'patient_id', 'x', 'y', 'tissue', 'shard', 'footprint'].includes(k))
      .map((k) => `${k}: ${h[k]}`).join(' · ');
    div.title = `patch ${h.patch_id} · ${h.slide_id} at (${h.x}, ${h.y}) · tissue ${h.tissue.toFixed(2)}`;
    div.innerHTML = `<img alt="patch ${h.patch_id}" loading="lazy" src="${api}/patches/${h.patch_id}.jpeg">
      <div class="cap"><span class="score">${h.score.toFixed(4)}</span> <span class="muted">#${h.rank}</span>
      <div class="sub">${esc(h.slide_id)} · ${esc(h.patient_id)}</div><div class="sub">${esc(extra)}</div></div>`;
    div.addEventListener('click', () => openSlide(h.slide_id, { x: h.x, y: h.y, size: h.footprint }));
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

// ---- heatmap ------------------------------------------------------------------------------
function clearHeatmap() {
  if (state.heat) viewer.removeOverlay(state.heat);
  state.heat = null;
  $('legend').hidden = true;
}

function color(t) {
  const stops = [[49, 54, 149], [116, 173, 209], [254, 224, 144], [244, 109, 67], [165, 0, 38]];
  const at = Math.min(0.9999, Math.max(0, t)) * (stops.length - 1);
  const i = Math.floor(at), f = at - i;
  return stops[i].map((c, j) => Math.round(c + f * (stops[i + 1][j] - c)));
}

async function drawHeatmap() {
  clearHeatmap();
  if (!state.slide || !state.query) return;
  try {
    const { box, ...query } = state.query;
    const h = await call('/heatmap', Object.assign({ target: state.slide }, box ? Object.assign(query, { box }) : query));
    const item = viewer.world.getItemAt(0);
    if (!item || h.slide_id !== state.slide || h.patches.length === 0) return;
    const size = item.source.dimensions;
    const fp = h.footprint;
    const canvas = document.createElement('canvas');
    canvas.width = Math.ceil(size.x / fp);
    canvas.height = Math.ceil(size.y / fp);
    canvas.className = 'heat';
    const ctx = canvas.getContext('2d');
    const span = h.max - h.min || 1;
    for (const [x, y, s] of h.patches) {
      const t = h.higher_is_better ? (s - h.min) / span : (h.max - s) / span;
      const [r, g, b] = color(t);
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(Math.floor(x / fp), Math.floor(y / fp), 1, 1);
    }
    viewer.addOverlay({ element: canvas, location: viewer.viewport.imageToViewportRectangle(0, 0, canvas.width * fp, canvas.height * fp) });
    state.heat = canvas;
    $('legend').hidden = false;
  } catch (err) {
    showError(err.message);
  }
}

// ---- wiring -------------------------------------------------------------------------------
$('mode-point').addEventListener('click', () => setMode('point'));
$('mode-box').addEventListener('click', () => setMode('box'));
$('heatmap').addEventListener('change', (e) => (e.target.checked ? drawHeatmap() : clearHeatmap()));
$('search-form').addEventListener('submit', (e) => { e.preventDefault(); if (state.query) search(state.query); });
$('download-json').addEventListener('click', () => download('tessera-hits.json', 'application/json', JSON.stringify(state.result, null, 2)));
$('download-csv').addEventListener('click', () => download('tessera-hits.csv', 'text/csv', csv(state.result.hits)));
let typing = null;
$('slide-search').addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(loadSlides, 200); });

(async () => {
  try {
    const info = await call('/info');
    state.info = info;
    const model = info.model && (info.model.model || info.model.kind) || 'model';
    $('index-info').textContent = `${info.tag} · ${info.rows.toLocaleString()} patches · ${info.slides} slides · ${model} · ${info.index_spec} · ${info.ranks} rank(s)`;
    for (const s of (await call('/slides')).slides) state.cohort.set(s.slide_id, s);
    await loadSlides();
    if (state.slides.length) await openSlide(state.slides[0].slide_id);
    status('ready');
  } catch (err) {
    showError(err.message);
    status('not connected');
  }
})();
