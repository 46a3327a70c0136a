// /latency: p50 and p99 per method and per tool, over time, from the stored
// timings: the upstream's latency (what mcptape_proxy_upstream_latency_seconds
// measures, from the same instants) or a call's duration.

import { h, s, clipped, fmtCount, fmtMs, fmtTime, ms, section, table } from '../dom.js';
import { api } from '../api.js';

const COLORS = 8; // .c0 … .c7 in the stylesheet

function toLocalInput(v) {
  const d = new Date(v);
  if (!v || isNaN(d)) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export async function latencyPage({ main, query, signal, navigate }) {
  document.title = 'Latency · mcptape';
  const q = new URLSearchParams();
  for (const k of ['measure', 'since', 'until', 'buckets', 'method', 'tool', 'session']) if (query.get(k)) q.set(k, query.get(k));
  const measure = query.get('measure') === 'duration' ? 'duration' : 'upstream';
  const select = h('select', { name: 'measure' }, ...Object.entries(MEASURES).map(([v, m]) =>
    h('option', { value: v, selected: v === measure }, m.label)));
  const form = h('form', { class: 'filters' },
    h('label', { class: 'field' }, h('span', {}, 'Measure'), select),
    h('label', { class: 'field' }, h('span', {}, 'From'), h('input', { type: 'datetime-local', name: 'since', value: toLocalInput(query.get('since')) })),
    h('label', { class: 'field' }, h('span', {}, 'To'), h('input', { type: 'datetime-local', name: 'until', value: toLocalInput(query.get('until')) })),
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
    query.get('since') || query.get('until') || query.get('session') ? '' : ' (by default, the last 24 hours of recording)'));
  if (ans.methods.length === 0) {
    main.append(h('p', { class: 'empty' }, MEASURES[measure].empty));
    return;
  }
  const row = (label, m, i) => h('tr', {},
    h('td', {}, h('span', { class: 'swatch c' + (i % COLORS) }), ' ', clipped(label, 80)),
    h('td', { class: 'num' }, fmtCount(m.n)), h('td', { class: 'num' }, fmtMs(m.p50)), h('td', { class: 'num' }, fmtMs(m.p99)));
  main.append(section('p50 (solid) and p99 (dashed), milliseconds, per method', chart(ans)),
    section('Per method', table(['Method', MEASURES[measure].count, 'p50', 'p99'], ans.methods.map((m, i) => row(m.method, m, i)), { class: 'grid' })));
  if (ans.tools.length > 0) {
    main.append(section('Per tool (tools/call)', table(['Tool', MEASURES[measure].count, 'p50', 'p99'], ans.tools.map((m, i) => row(m.tool, m, i)), { class: 'grid tools' })));
  }
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

function chart(ans) {
  const W = 900, H = 320, L = 60, R = 10, T = 10, B = 40;
  const t0 = ms(ans.from), t1 = Math.max(ms(ans.to), t0 + 1);
  let ymax = 0;
  for (const m of ans.methods) for (const p of m.points) ymax = Math.max(ymax, p.p99);
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const x = (t) => L + ((ms(t) + ans.bucketMs / 2 - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / ymax) * (H - T - B);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'img', 'aria-label': 'latency chart' });
  for (let i = 0; i <= 4; i++) {
    const v = (ymax * i) / 4;
    svg.append(s('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid-line' }),
      s('text', { x: L - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, fmtMs(v)));
  }
  svg.append(s('text', { x: L, y: H - 12, class: 'axis' }, fmtTime(ans.from)),
    s('text', { x: W - R, y: H - 12, class: 'axis', 'text-anchor': 'end' }, fmtTime(ans.to)));
  ans.methods.forEach((m, i) => {
    const c = 'c' + (i % COLORS);
    for (const [key, dash] of [['p50', ''], ['p99', ' dashed']]) {
      const pts = m.points.map((p) => `${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(' ');
      svg.append(s('polyline', { points: pts, class: 'series ' + c + dash }));
    }
    for (const p of m.points) {
      svg.append(s('circle', { cx: x(p.t).toFixed(1), cy: y(p.p99).toFixed(1), r: 3, class: 'dot ' + c },
        s('title', {}, `${m.method} ${fmtTime(p.t)}: p50 ${fmtMs(p.p50)}, p99 ${fmtMs(p.p99)}, ${p.n} requests`)));
    }
  });
  return h('div', { class: 'scroll' }, svg);
}
