// Similar slides and similar cases of the open slide (app.js): by slide or patient vector (the
// slide indexes serve holds, /api/v1/similar-slides and /similar-patients) or by mosaic voting over
// the patch index (/api/v1/mosaic-vote); a ranked list with thumbnails, scores or votes, labels and
// patients; a click opens a slide. In mosaic voting, the hits each voting patch searches and the
// rows listed are two settings (the votes depend on the first only).
'use strict';

const similar = { kind: null, result: null, method: null, mosaic: [] };
const standardKeys = ['rank', 'score', 'votes', 'best_score', 'slide_id', 'patient_id', 'n_patches', 'slides'];

function indexOf(level) { return ((state.info && state.info.slide_indexes) || []).find((i) => i.level === level); }
function similarError(text) { $('similar-error').hidden = !text; $('similar-error').textContent = text || ''; }

function showTab(tab) {
  for (const t of ['patches', 'slides', 'cases']) {
    const el = $('tab-' + t);
    el.classList.toggle('active', t === tab);
    el.setAttribute('aria-selected', String(t === tab));
  }
  $('view-patches').hidden = tab !== 'patches';
  $('view-similar').hidden = tab === 'patches';
  if (tab !== 'patches' && similar.kind !== tab) { similar.kind = tab; similar.result = null; fillMethods(); renderSimilar(); }
  drawOutlines();
}

// The methods of a kind: the slide or patient vector when such an index is served, mosaic voting always.
function fillMethods() {
  const level = similar.kind === 'cases' ? 'patient' : 'slide';
  const index = indexOf(level);
  const select = $('similar-method');
  select.replaceChildren();
  if (index) select.add(new Option(`${level} vector (${index.encoder})`, 'vector'));
  select.add(new Option('mosaic vote (patch index)', 'vote'));
  showFilter();
  $('similar-title').textContent = similar.kind === 'cases' ? 'Similar cases' : 'Similar slides';
  $('similar-run').textContent = similar.kind === 'cases' ? 'Find similar cases' : 'Find similar slides';
  showSimilarHint();
}

// Mosaic votes search the patch index, where query's filter language applies.
function showFilter() {
  const vote = $('similar-method').value === 'vote';
  $('similar-filter-label').hidden = !vote;
  $('vote-k-label').hidden = !vote;
}

function showSimilarHint() {
  const what = similar.kind === 'cases' ? 'cases' : 'slides';
  $('similar-hint').textContent = state.slide
    ? `Press "${$('similar-run').textContent}" to rank the cohort's ${what} by likeness to ${state.slide}.`
    : `Open a slide, then ask for similar ${what}.`;
}

async function findSimilar(kind) {
  if (kind) showTab(kind);
  similarError('');
  if (!state.slide) { similarError('Open a slide first.'); return; }
  const slide = state.cohort.get(state.slide) || {};
  const method = $('similar-method').value;
  const k = Number($('similar-k').value);
  const exclude = $('similar-exclude').checked;
  status('ranking ' + (similar.kind === 'cases' ? 'cases' : 'slides') + '…');
  try {
    let result;
    if (method === 'vote') {
      const body = { slide_id: state.slide, k: Number($('vote-k').value), top: k, exclude_same_patient: exclude };
      const filter = $('similar-filter').value.trim();
      if (filter) body.filter = filter;
      result = await call('/mosaic-vote', body);
    } else if (similar.kind === 'cases') {
      if (!slide.patient_id) throw new Error(`slide ${state.slide} has no patient id`);
      result = await call('/similar-patients', { patient_id: slide.patient_id, k, exclude_same_patient: exclude });
    } else {
      result = await call('/similar-slides', { slide_id: state.slide, k, exclude_same_patient: exclude });
    }
    similar.result = result;
    similar.method = method;
    similar.source = state.slide;
    similar.mosaic = method === 'vote' ? result.query.mosaic.map((p) => ({ x: p.x, y: p.y, size: result.query.footprint })) : [];
    renderSimilar();
    drawOutlines();
    status(`${similarItems().length} ${similar.kind === 'cases' ? 'cases' : 'slides'} in ${result.latency_ms.toFixed(1)} ms`);
  } catch (err) {
    similarError(err.message);
    status('ranking failed');
  }
}

function similarItems() {
  const r = similar.result;
  if (!r) return [];
  if (similar.method === 'vote') return similar.kind === 'cases' ? r.patients : r.slides;
  return r.hits;
}

function labelsOf(entry, slideId) {
  const own = Object.entries(entry).filter(([k, v]) => !standardKeys.includes(k) && v !== '' && v !== null);
  if (own.length || !slideId) return own;
  const s = state.cohort.get(slideId);
  return s ? Object.entries(s.metadata) : [];
}

function chips(pairs) {
  return pairs.map(([k, v]) => `<span class="chip"><span class="muted">${esc(k)}</span> ${esc(v)}</span>`).join('');
}

function thumb(id) {
  if (!state.cohort.has(id)) return '<div class="thumb none" title="not in the patch index"></div>';
  return `<img class="thumb" alt="slide ${esc(id)}" loading="lazy" src="${slideUrl(id)}/thumbnail.jpeg" data-open="${esc(id)}">`;
}

function measure(e) {
  if (similar.method === 'vote') {
    return `<div class="measure"><b>${e.votes}</b> vote${e.votes === 1 ? '' : 's'}<div class="muted">best ${e.best_score.toFixed(4)}</div></div>`;
  }
  return `<div class="measure"><b class="score">${e.score.toFixed(4)}</b><div class="muted">${esc(similar.result.search.metric === 'ip' ? 'cosine' : 'distance')}</div></div>`;
}

function renderSimilar() {
  const list = $('similar-list');
  list.replaceChildren();
  const r = similar.result;
  $('similar-hint').hidden = Boolean(r);
  $('similar-query').hidden = !r;
  $('similar-count').textContent = r ? `${similarItems().length} of ${r.search.top || r.search.k}` : '';
  if (!r) return;
  const source = state.cohort.get(similar.source) || { metadata: {} };
  const how = similar.method === 'vote'
    ? `a mosaic of ${r.query.mosaic.length} patches voted, each for the ${similar.kind === 'cases' ? 'patients' : 'slides'} among its ${r.search.k} nearest patches (outlined in blue)`
    : `${r.search.rows} ${r.query.level}s searched by ${esc(r.search.encoder)} vectors`;
  const about = similar.method === 'vote' ? Object.entries(source.metadata) : Object.entries(r.query.labels || {});
  $('similar-query').innerHTML = `${thumb(similar.source)}<div><b>${similar.kind === 'cases' ? 'Cases like' : 'Slides like'} ${esc(similar.source)}</b>
    <div class="muted">${esc(source.patient_id || r.query.patient_id || 'no patient id')} · ${how}</div><div>${chips(about)}</div></div>`;
  for (const e of similarItems()) {
    const li = document.createElement('li');
    if (similar.kind === 'cases') {
      const id = e.patient_id;
      const slides = e.slides ? [...new Set(e.slides.split('|'))] : [...state.cohort.values()].filter((s) => (s.patient_id || s.slide_id) === id).map((s) => s.slide_id);
      li.dataset.patient = id;
      li.innerHTML = `<div class="rank">${e.rank}</div><div class="body"><div class="id">${esc(id)}</div>
        <div>${chips(labelsOf(e, slides[0]))}</div>
        <div class="thumbs">${slides.map((s) => `<figure>${thumb(s)}<figcaption>${esc(s)}</figcaption></figure>`).join('')}</div></div>${measure(e)}`;
    } else {
      li.dataset.slide = e.slide_id;
      li.classList.toggle('clickable', state.cohort.has(e.slide_id));
      li.innerHTML = `<div class="rank">${e.rank}</div>${thumb(e.slide_id)}<div class="body"><div class="id">${esc(e.slide_id)}</div>
        <div class="muted">${esc(e.patient_id || 'no patient id')}${e.n_patches ? ' · ' + e.n_patches.toLocaleString() + ' patches' : ''}</div>
        <div>${chips(labelsOf(e, e.slide_id))}</div></div>${measure(e)}`;
      if (state.cohort.has(e.slide_id)) li.addEventListener('click', () => openSlide(e.slide_id));
    }
    li.classList.toggle('active', li.dataset.slide === state.slide);
    list.appendChild(li);
  }
  for (const img of list.querySelectorAll('[data-open]')) {
    img.addEventListener('click', (ev) => { ev.stopPropagation(); openSlide(img.dataset.open); });
  }
}

// The mosaic of the slide the votes came from, outlined while the ranking is shown (app.js's
// drawOutlines calls this; it draws the patch hits only while the Patches tab is shown).
function drawMosaic() {
  if ($('view-similar').hidden || similar.source !== state.slide) return;
  for (const p of similar.mosaic) addOutline(p.x, p.y, p.size, p.size, 'query mosaic');
}

function onSlideOpened() {
  $('find-slides').disabled = $('find-cases').disabled = $('similar-run').disabled = !state.slide;
  showSimilarHint();
  for (const li of document.querySelectorAll('#similar-list li')) li.classList.toggle('active', li.dataset.slide === state.slide);
}

$('find-slides').addEventListener('click', () => findSimilar('slides'));
$('find-cases').addEventListener('click', () => findSimilar('cases'));
$('tab-patches').addEventListener('click', () => showTab('patches'));
$('tab-slides').addEventListener('click', () => showTab('slides'));
$('tab-cases').addEventListener('click', () => showTab('cases'));
for (const id of ['similar-method', 'similar-k', 'vote-k', 'similar-exclude']) {
  $(id).addEventListener('change', () => { showFilter(); if (similar.result) findSimilar(); });
}
$('similar-form').addEventListener('submit', (e) => { e.preventDefault(); findSimilar(); });
