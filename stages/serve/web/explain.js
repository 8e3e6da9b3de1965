// What the page tells the user about the index and about searches that found nothing (app.js):
// a readable header, the notice for built-in models (random weights), filter examples taken from
// the index's own columns and values, and why a filter matched no patch (the column's values, or
// the nearest ones to a value that is not there). Cohort values come from /api/v1/slides
// (state.cohort): every slide-level column (slide_id, patient_id, the manifest's columns).
'use strict';

function patientsOf(cohort) { return new Set([...cohort.values()].map((s) => s.patient_id || s.slide_id)); }

// The header: model, patches, slides, patients; the rest of the index in its tooltip.
function describeIndex(info, cohort) {
  const model = (info.model && (info.model.model || info.model.kind)) || info.tag;
  const name = model === info.tag ? model : `${model} (index ${info.tag})`;
  const text = `${name} · ${info.rows.toLocaleString()} patches · ${info.slides} slides · ` +
               `${patientsOf(cohort).size} patients`;
  const metric = info.metric === 'ip' ? (info.normalize ? 'cosine' : 'inner product') : 'L2 distance';
  const title = `index ${info.index}\n${info.index_spec}, ${metric}, dimension ${info.dimension}, ` +
                `${info.shards} shard(s) on ${info.ranks} rank(s), generation ${info.service_generation}`;
  return { text, title };
}

// The notice for a built-in model, or null: its weights are random (embed's built-in
// architectures), so its scores say how alike pixels look, not what the tissue is.
function modelNotice(info) {
  const m = info.model || {};
  if (m.kind !== 'builtin') return null;
  return `Random weights: ${m.model || 'this model'} is a built-in model whose weights are random ` +
         '(it tests the machinery). Scores say how alike the pixels look, not what the tissue is: ' +
         'do not read them as pathology.';
}

// Every value of a slide-level column in the cohort, sorted (null for a column that is not one).
function columnValues(column, cohort) {
  const slides = [...cohort.values()];
  let values;
  if (column === 'slide_id') values = slides.map((s) => s.slide_id);
  else if (column === 'patient_id') values = slides.map((s) => s.patient_id).filter(Boolean);
  else if (slides.some((s) => column in s.metadata)) values = slides.map((s) => s.metadata[column]);
  else return null;
  return [...new Set(values.filter((v) => v !== undefined && v !== null && v !== '').map(String))]
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
}

const isNumber = (v) => /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v);

// Filter examples from the index's own columns: a string column of the manifest with one of its
// values, and the tissue share every patch has.
function filterExamples(info, cohort) {
  const known = new Set(info.filter_columns || []);
  const slides = [...cohort.values()];
  const columns = [...new Set(slides.flatMap((s) => Object.keys(s.metadata)))].filter((c) => known.has(c));
  let term = '';
  for (const c of columns) {
    const values = columnValues(c, cohort);
    if (values.length && !values.every(isNumber)) { term = `${c} = ${quoteValue(values[0])}`; break; }
  }
  const tissue = known.has('tissue') ? 'tissue >= 0.5' : '';
  return { patches: 'e.g. ' + ([term, tissue].filter(Boolean).join(' and ') || 'slide_id = ' + (slides[0] || {}).slide_id),
           vote: 'e.g. ' + (term || tissue || 'slide_id != ' + (slides[0] || {}).slide_id) };
}

function quoteValue(v) { return /^[A-Za-z0-9_.:/+-]+$/.test(v) && !/^(and|or|not|in)$/i.test(v) ? v : `'${v.replace(/'/g, "''")}'`; }

// The tokens of query's filter language (common/search/filter.h): bare words, quoted strings,
// operators and punctuation; enough to find its `column op value` terms.
function filterTokens(text) {
  const tokens = [];
  const re = /\s*(?:([A-Za-z0-9_.:/+-]+)|'((?:[^'\\]|''|\\.)*)'|"((?:[^"\\]|""|\\.)*)"|(==|!=|<>|<=|>=|=|<|>|\(|\)|,))/y;
  let m;
  while (re.lastIndex < text.length && (m = re.exec(text))) {
    if (m[1] !== undefined) tokens.push({ word: m[1] });
    else if (m[2] !== undefined) tokens.push({ value: m[2].replace(/''/g, "'").replace(/\\(.)/g, '$1') });
    else if (m[3] !== undefined) tokens.push({ value: m[3].replace(/""/g, '"').replace(/\\(.)/g, '$1') });
    else tokens.push({ op: m[4] });
    if (!m[0].length) break;
  }
  return tokens;
}

// The equality terms of a filter: {column, values} for `c = v`, `c == v` and `c in (v, ...)`.
function equalityTerms(text) {
  const t = filterTokens(text);
  const literal = (x) => x && (x.value !== undefined ? x.value : x.word);
  const terms = [];
  for (let i = 0; i + 2 < t.length; ++i) {
    if (!t[i].word) continue;
    if (t[i + 1].op === '=' || t[i + 1].op === '==') {
      if (literal(t[i + 2]) !== undefined) terms.push({ column: t[i].word, values: [literal(t[i + 2])] });
    } else if (t[i + 1].word && /^in$/i.test(t[i + 1].word) && t[i + 2].op === '(') {
      const values = [];
      for (let j = i + 3; j < t.length && t[j].op !== ')'; ++j) if (literal(t[j]) !== undefined) values.push(literal(t[j]));
      terms.push({ column: t[i].word, values });
    }
  }
  return terms;
}

function editDistance(a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; ++i) {
    const row = [i];
    for (let j = 1; j <= b.length; ++j) {
      row.push(Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1)));
    }
    prev = row;
  }
  return prev[b.length];
}

// The values of `values` nearest `v` (case ignored), when near enough to be a likely typo.
function nearestValues(v, values) {
  const scored = values.map((x) => ({ x, d: editDistance(v.toLowerCase(), x.toLowerCase()) }));
  const best = Math.min(...scored.map((s) => s.d));
  if (!(best <= Math.max(1, Math.floor(v.length / 3)))) return [];
  return scored.filter((s) => s.d === best).map((s) => s.x);
}

function listOf(values, limit = 12) {
  const shown = values.slice(0, limit).map((v) => `'${v}'`).join(', ');
  return values.length > limit ? `${shown}, … (${values.length} in all)` : shown;
}

// Why a search with a filter found no patch: one line for the search, then one per equality term
// on a slide-level column: its values, and the nearest to a value the cohort does not have.
function explainEmpty(result, cohort, info) {
  const who = result.exclude_same_patient ? ' among the other patients' : result.exclude_same_slide ? ' on the other slides' : '';
  const lines = [`No patch matches the filter "${result.filter}"${who}.`];
  for (const term of equalityTerms(result.filter)) {
    const values = columnValues(term.column, cohort);
    if (!values) continue;
    const missing = term.values.filter((v) => !values.includes(v));
    for (const v of missing) {
      const near = nearestValues(v, values);
      lines.push(`${term.column} is never '${v}'` + (near.length ? `: did you mean ${listOf(near)}?` : '.'));
    }
    if (values.every(isNumber) && values.length > 1) {
      lines.push(`${term.column} ranges from ${values[0]} to ${values[values.length - 1]} (${values.length} values).`);
    } else {
      lines.push(`${term.column} has the values ${listOf(values)}.`);
    }
  }
  if (lines.length === 1) {
    if (who) lines.push('Uncheck "Exclude same patient" to search the query\'s own patient too.');
    lines.push(`Columns of this index: ${(info.filter_columns || []).join(', ')}.`);
  }
  return lines.join('\n');
}
