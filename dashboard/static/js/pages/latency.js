// /latency: p50 and p99 per method and per tool, over time, from the stored
// timings: the upstream's latency (what mcptape_proxy_upstream_latency_seconds
// measures, from the same instants) or a call's duration.

import { h, s, clipped, fmtCount, fmtMs, fmtTime, ms, section, table } from '../dom.js';
import { api } from '../api.js';
import { toLocalInput } from './sessions.js';



export async function latencyPage({ main, query, signal, navigate }) {
  document.title = 'Latency · mcptape';
  const q = new URLSearchParams();
  for (const k of ['measure', 'since', 'until', 'buckets', 'method', 'tool', 'session']) if (query.get(k)) q.set(k, query.get(k));
  const measure = query.get('measure') === 'duration' ? 'duration' : 'upstream';
  const select = h('select', { name: 'measure' }, ...Object.entries(MEASURES).map(([v, m]) =>
    h('option', { value: v, selected: v === measure }, m.label)));
  const form = h('form', { class: 'filters' },
    h('label', { class: 'field' }, h('span', {}, 'Measure'), select),
    h('label', { class: 'field' }, h('span', {}, 'From'), h('input', { type: 'datetime-local', step: '1', name: 'since', value: toLocalInput(query.get('since')) })),
    h('label', { class: 'field' }, h('span', {}, 'To'), h('input', { type: 'datetime-local', step: '1', name: 'until', value: toLocalInput(query.get('until')) })),
    h('label', { class: 'field' }, h('span', {}, 'Buckets'), h('input', { type: 'number', name: 'buckets', min: '1', max: '500', value: query.get('buckets') || '24' })),
    h('label', { class: 'field' }, h('span', {}, 'Method'), h('input', { type: 'search', name: 'method', value: query.get('method') || '', placeholder: 'all' })),
    h('label', { class: 'field' }, h('span', {}, 'Tool'), h('input', { type: 'search', name: 'tool', value: query.get('tool') || '', placeholder: 'all' })),
    query.get('session') ? h('input', { type: 'hidden', name: 'session', value: query.get('session') }) : '',
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Show')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const el of form.elements) {
      if (!el.name || !el.value || (el.name === 'measure' && el.value === 'upstream')) continue;
      p.set(el.name, el.type === 'datetime-local' ? new Date(el.value).toISOString() : el.value);
    }
    navigate('/latency?' + p);
  });
  main.append(h('h1', {}, 'Latency'), query.get('session') ? h('p', { class: 'muted' }, 'Session ', h('code', {}, clipped(query.get('session'), 80))) : '', form,
    h('p', { class: 'muted measure-definition' }, MEASURES[measure].definition));
  const ans = await api('/latency?' + q, { signal });
  main.append(h('p', { class: 'muted' }, `${fmtTime(ans.from)} to ${fmtTime(ans.to)}`,
    query.get('since') || query.get('until') || query.get('session') ? '' : ' (by default, from the first to the last sample of the last day of recording)'));
  if (ans.methods.length === 0) {
    main.append(h('p', { class: 'empty' }, MEASURES[measure].empty));
    return;
  }
  // The chart draws the methods with the most samples, each in a colour
  // of its own that tells it from the others; the rest are in the table.
  const charted = [...ans.methods].sort((a, b) => b.n - a.n).slice(0, COLORS);
  const colorOf = new Map(charted.map((m, i) => [m.method, i]));
  const row = (label, m, color) => h('tr', {},
    h('td', {}, color !== undefined ? swatch(color) : h('span', { class: 'swatch-none', title: 'not in the chart' }), ' ', clipped(label, 80), LABELS[label] ? h('span', { class: 'muted small' }, ` — ${LABELS[label]}`) : ''),
    h('td', { class: 'num' }, fmtCount(m.n)), h('td', { class: 'num' }, fmtMs(m.p50)), h('td', { class: 'num' }, fmtMs(m.p99)));
  const rest = ans.methods.length - charted.length;
  main.append(section('p50 (solid) and p99 (dashed), per method', chart(ans, charted, colorOf), legend(charted, colorOf),
    rest > 0 ? h('p', { class: 'muted small' }, `The chart draws the ${COLORS} methods with the most samples; the ${fmtCount(rest)} others are in the table below (filter by method to chart one).`) : ''),
  section('Per method', table(['Method', MEASURES[measure].count, 'p50', 'p99'], ans.methods.map((m) => row(m.method, m, colorOf.get(m.method))), { class: 'grid' })));
  if (ans.tools.length > 0) {
    main.append(section('Per tool (tools/call)', table(['Tool', MEASURES[measure].count, 'p50', 'p99'], ans.tools.map((m) => row(m.tool, m, undefined)), { class: 'grid tools' })));
  }
}

// LABELS explain the labels that are not methods.
const LABELS = {
  none: 'exchanges that carried no JSON-RPC message (the GET stream, DELETE)',
  other: 'batches, and tools past the label limit',
};

// COLORS is how many series the chart draws: the stylesheet's c0…c7,
// colours chosen to tell apart (in both themes), not shades of a hue.
const COLORS = 8;

// swatch is a colour sample of series i.
function swatch(i) {
  return s('svg', { class: 'swatch', width: '12', height: '12', viewBox: '0 0 12 12', 'aria-hidden': 'true' },
    s('rect', { x: '0', y: '0', width: '12', height: '12', rx: '2', class: `c${i}` }));
}

function legend(methods, colorOf) {
  return h('ul', { class: 'legend', 'aria-label': 'legend' }, methods.map((m) => h('li', { 'data-method': m.method },
    swatch(colorOf.get(m.method)), ' ', clipped(m.method, 60), LABELS[m.method] ? h('span', { class: 'muted' }, ` (${LABELS[m.method]})`) : '')),
  h('li', { class: 'muted' }, 'solid: p50 · dashed: p99'));
}

// runs splits a series' points where buckets without samples lie between
// them: a line is drawn only across buckets that have samples.
export function runs(points, bucketMs) {
  const out = [];
  let run = [];
  for (const p of points) {
    if (run.length && ms(p.t) - ms(run[run.length - 1].t) > bucketMs * 1.5) {
      out.push(run);
      run = [];
    }
    run.push(p);
  }
  if (run.length) out.push(run);
  return out;
}

// MEASURES are the quantities the chart can show (the API's measure=).
const MEASURES = {
  upstream: {
    label: 'upstream latency (as mcptape_proxy_upstream_latency_seconds)',
    definition: 'Upstream latency: from the proxy forwarding a request to the upstream\'s response headers, ' +
      'one sample per exchange the upstream answered, by method and tool as the proxy labels them: ' +
      'the same instants, samples and labels as the Prometheus histogram mcptape_proxy_upstream_latency_seconds. ' +
      'For a streamed (SSE) answer it ends when the stream opens, not when the result arrives.',
    count: 'Exchanges',
    empty: 'No exchanges answered by the upstream in this range (older recordings did not note the upstream\'s timings: try call duration).',
  },
  duration: {
    label: 'call duration (request → response message)',
    definition: 'Call duration: from a JSON-RPC request to its response message, as each crossed the proxy, ' +
      'one sample per answered request, by the request\'s method and tool. It includes the time a streamed answer took.',
    count: 'Requests',
    empty: 'No answered requests in this range.',
  },
};

// niceStep is a round step (1, 2 or 5 × 10^k) that splits span into
// about n parts.
function niceStep(span, n) {
  const raw = span / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// fmtTick shows a duration in ms with as many decimals as the step needs,
// so that neighbouring labels differ.
function fmtTick(v, step) {
  if (step >= 1000) return `${(v / 1000).toFixed(step >= 10000 ? 0 : 1)}s`;
  const d = step >= 1 ? 0 : Math.min(3, Math.ceil(-Math.log10(step)));
  return `${v.toFixed(d)}ms`;
}

// fmtAt shows an instant with the precision the range needs.
function fmtAt(t, spanMs) {
  const d = new Date(t);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (spanMs < 10000) return `${hms}.${pad(d.getMilliseconds(), 3)}`;
  if (spanMs < 86400000) return hms;
  return `${d.getMonth() + 1}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function chart(ans, methods, colorOf) {
  const W = 900, H = 320, L = 64, R = 14, T = 10, B = 40;
  const t0 = ms(ans.from), t1 = Math.max(ms(ans.to), t0 + 1);
  let ymax = 0;
  for (const m of methods) for (const p of m.points) ymax = Math.max(ymax, p.p99);
  if (!(ymax > 0)) ymax = 1;
  const ystep = niceStep(ymax, 4);
  const ytop = Math.ceil(ymax / ystep) * ystep;
  const x = (t) => L + ((ms(t) + ans.bucketMs / 2 - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / ytop) * (H - T - B);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': 'latency chart' });
  for (let v = 0; v <= ytop + ystep / 2; v += ystep) {
    svg.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid-line' }),
      s('text', { x: L - 6, y: y(v) + 4, class: 'axis y-tick', 'text-anchor': 'end' }, fmtTick(v, ystep)));
  }
  // Time ticks: a few, each with the precision the range needs.
  const span = t1 - t0;
  const ticks = 5;
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + (span * i) / ticks;
    const px = L + (i / ticks) * (W - L - R);
    svg.append(s('line', { x1: px, x2: px, y1: H - B, y2: H - B + 4, class: 'grid-line' }),
      s('text', { x: px, y: H - 18, class: 'axis x-tick', 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' }, fmtAt(t, span)));
  }
  for (const m of methods) {
    const c = `c${colorOf.get(m.method)}`;
    for (const run of runs(m.points, ans.bucketMs)) {
      if (run.length < 2) continue; // a lone bucket is its dots
      for (const [key, dash] of [['p50', ''], ['p99', ' dashed']]) {
        const pts = run.map((p) => `${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(' ');
        svg.append(s('polyline', { points: pts, class: `series${dash} ${c}`, 'data-method': m.method }));
      }
    }
    for (const p of m.points) {
      svg.append(s('circle', { cx: x(p.t).toFixed(1), cy: y(p.p99).toFixed(1), r: 3, class: `dot ${c}`, 'data-method': m.method },
        s('title', {}, `${m.method} ${fmtTime(p.t)}: p50 ${fmtMs(p.p50)}, p99 ${fmtMs(p.p99)}, ${p.n} samples`)));
      svg.append(s('circle', { cx: x(p.t).toFixed(1), cy: y(p.p50).toFixed(1), r: 2, class: `dot ${c}`, 'data-method': m.method }));
    }
  }
  return h('div', { class: 'scroll' }, svg);
}
