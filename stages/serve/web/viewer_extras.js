// What the viewer of app.js draws besides the slide and the outlines: the similarity heatmap over
// the open slide with its score scale, and the scale bar with the magnification the view shows
// (from the slide's µm per pixel, /api/v1/slides' slide_mpp).
'use strict';

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

// Enough digits to tell the two ends of the scale apart.
function scaleDigits(lo, hi) {
  const span = Math.abs(hi - lo);
  return span > 0 ? Math.min(6, Math.max(3, 1 - Math.floor(Math.log10(span)))) : 4;
}

// The legend: the scores at the two ends of the colour ramp (least similar left), and a note when
// they lie so close that the colours stretch a tiny range.
function showLegend(h) {
  const digits = scaleDigits(h.min, h.max);
  const [left, right] = h.higher_is_better ? [h.min, h.max] : [h.max, h.min];
  $('legend-lo').textContent = left.toFixed(digits);
  $('legend-hi').textContent = right.toFixed(digits);
  const what = h.metric === 'ip' ? 'score' : 'distance';
  $('legend').title = `${what} of each patch of this slide to the query; colours stretch from the slide's lowest to its highest`;
  const span = h.max - h.min;
  const tiny = span < 0.05 * Math.max(Math.abs(h.min), Math.abs(h.max), 1e-12);
  $('legend-note').hidden = !tiny;
  $('legend-note').textContent = tiny
    ? `Every ${what} on this slide lies within ${span.toPrecision(2)}: the colours stretch a tiny range, so small differences look large.`
    : '';
  $('legend').hidden = false;
}

async function drawHeatmap() {
  clearHeatmap();
  if (!state.slide) return;
  if (!state.query) {
    showNote('The heatmap colours the open slide by likeness to a query: click a point or drag a box on the slide first.');
    return;
  }
  try {
    const { box, ...query } = state.query;
    const h = await call('/heatmap', Object.assign({ target: state.slide }, box ? Object.assign(query, { box }) : query));
    const item = viewer.world.getItemAt(0);
    if (!item || h.slide_id !== state.slide || !$('heatmap').checked) return;
    if (h.patches.length === 0) { showNote(`Slide ${h.slide_id} has no patch to colour.`); return; }
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
    clearHeatmap();
    viewer.addOverlay({ element: canvas, location: viewer.viewport.imageToViewportRectangle(0, 0, canvas.width * fp, canvas.height * fp) });
    state.heat = canvas;
    showLegend(h);
  } catch (err) {
    showError(err.message);
  }
}

// ---- scale bar and magnification ----------------------------------------------------------
// The longest of 1, 2, 5 x 10^n µm that fits in `max` screen pixels.
function niceLength(umPerPx, max) {
  const limit = umPerPx * max;
  let best = 0;
  for (let e = -2; e <= 6; ++e) {
    for (const m of [1, 2, 5]) {
      const v = m * 10 ** e;
      if (v <= limit) best = v;
    }
  }
  return best;
}

// µm per screen (CSS) pixel of the current view, or 0 when the slide's pixel size is unknown.
function screenMicrons() {
  const item = viewer.world.getItemAt(0);
  const slide = state.cohort.get(state.slide);
  const mpp = slide && slide.slide_mpp;
  if (!item || !(mpp > 0)) return 0;
  return mpp / item.viewportToImageZoom(viewer.viewport.getZoom(true));
}

function updateScale() {
  const um = screenMicrons();
  $('scale').hidden = !(um > 0);
  if (!(um > 0)) return;
  const length = niceLength(um, 120);
  $('scale').querySelector('.bar').style.width = `${(length / um).toFixed(1)}px`;
  $('scale').querySelector('.length').textContent = length >= 1000 ? `${length / 1000} mm` : `${length} µm`;
  const mag = 10 / um;
  $('scale').querySelector('.mag').textContent = `${mag >= 10 ? Math.round(mag) : mag.toFixed(1)}×`;
  $('scale').title = `${um.toPrecision(3)} µm per screen pixel; magnification as 10 µm ÷ that (0.5 µm/px is 20×)`;
}

viewer.addHandler('animation', updateScale);
viewer.addHandler('open', updateScale);
viewer.addHandler('resize', updateScale);
