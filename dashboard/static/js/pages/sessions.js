// /sessions: every session, newest first, filtered and paged; the filters
// live in the query string, so a filtered list is a link.

import { h, chip, clipped, cls, fmtCount, fmtMs, fmtTime, sessionPath, via } from '../dom.js';
import { api } from '../api.js';

const FILTERS = ['q', 'method', 'tool', 'status', 'era', 'findings', 'label', 'since', 'until'];

export function toLocalInput(v) {
  // RFC 3339 in the query string; datetime-local in the form, to the
  // second (step 1), so a filter keeps the seconds it was given.
  const d = new Date(v);
  if (!v || isNaN(d)) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function filterForm(query, navigate) {
  const field = (name, label, input) => h('label', { class: 'field' }, h('span', {}, label), input);
  const text = (name, placeholder) => h('input', { name, type: 'search', value: query.get(name) || '', placeholder, autocomplete: 'off' });
  const select = (name, options) => {
    const sel = h('select', { name }, options.map(([v, t]) => h('option', { value: v, selected: (query.get(name) || '') === v }, t)));
    return sel;
  };
  const time = (name) => h('input', { name, type: 'datetime-local', step: '1', value: toLocalInput(query.get(name)) });
  const form = h('form', { class: 'filters', role: 'search' },
    field('q', 'Text in params and results', text('q', 'e.g. Paris')),
    field('method', 'Method (or its start)', text('method', 'tools, sampling…')),
    field('tool', 'Tool', text('tool', 'echo')),
    field('status', 'Status', select('status', [['', 'any'], ['open', 'open'], ['closed', 'closed'], ['incomplete', 'incomplete'], ['errors', 'with errors'], ['ok', 'without errors']])),
    field('era', 'Era', select('era', [['', 'any'], ['legacy', 'legacy'], ['modern', 'modern (2026-07-28)'], ['http', 'http (no MCP)']])),
    field('findings', 'Findings', select('findings', [['', 'any'], ['1', 'with findings'], ['0', 'without']])),
    field('label', 'Label', text('label', '')),
    field('since', 'Started after', time('since')),
    field('until', 'Started before', time('until')),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, 'Filter'),
      h('a', { href: '/sessions', class: 'button' }, 'Clear')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const name of FILTERS) {
      const el = form.elements.namedItem(name);
      let v = el.value.trim();
      if (!v) continue;
      if (el.type === 'datetime-local') {
        const d = new Date(v);
        if (isNaN(d)) continue;
        v = d.toISOString();
      }
      q.set(name, v);
    }
    navigate('/sessions' + (q.toString() ? '?' + q : ''));
  });
  return form;
}

export function sessionRow(s) {
  const client = [s.client.name, s.client.version].filter(Boolean).join(' ');
  const server = [s.server.name, s.server.version].filter(Boolean).join(' ');
  return h('tr', { 'data-session': s.id },
    h('td', {}, h('a', { href: sessionPath(s.id), class: 'mono' }, clipped(s.id, 60))),
    h('td', {}, s.era, s.version ? h('span', { class: 'muted' }, ' ' + s.version) : '',
      s.leg && s.leg !== 'reverse' || s.route ? h('div', { class: 'muted' }, clipped(via(s), 40)) : ''),
    h('td', {}, clipped(client || '—', 60)),
    h('td', {}, clipped(server || '—', 60)),
    h('td', { class: 'nowrap' }, fmtTime(s.start)),
    h('td', { class: 'num' }, fmtMs(s.durationMs)),
    h('td', { class: 'num' }, fmtCount(s.calls)),
    h('td', { class: 'num' + (s.errors ? ' bad' : '') }, fmtCount(s.errors)),
    h('td', { class: 'num' + (s.findings ? ' warn' : '') }, fmtCount(s.findings)),
    h('td', {}, chip(s.status, 'status-' + cls(s.status)), s.lost ? chip(`${s.lost} lost`, 'bad') : ''),
    h('td', {}, s.labels.map((l) => chip(l, 'label'))));
}

export async function sessionsPage({ query, main, signal, navigate }) {
  document.title = 'Sessions · mcptape';
  main.append(h('h1', {}, 'Sessions'), filterForm(query, navigate));
  const q = new URLSearchParams();
  for (const name of FILTERS) if (query.get(name)) q.set(name, query.get(name));
  const limit = Math.min(500, Math.max(1, parseInt(query.get('limit') || '50', 10) || 50));
  const offset = Math.max(0, parseInt(query.get('offset') || '0', 10) || 0);
  q.set('limit', String(limit));
  q.set('offset', String(offset));
  const started = performance.now();
  const page = await api('/sessions?' + q, { signal });
  const took = performance.now() - started;

  const headers = ['Session', 'Era', 'Client', 'Server', 'Start', 'Duration', 'Calls', 'Errors', 'Findings', 'Status', 'Labels'];
  const tbl = h('table', { class: 'grid sessions', 'data-ready': '' },
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, page.sessions.map(sessionRow)));
  const from = page.sessions.length ? offset + 1 : 0;
  const to = offset + page.sessions.length;
  const total = page.total >= 0 ? ` of ${fmtCount(page.total)}` : '';
  const link = (off) => {
    const p = new URLSearchParams(query);
    p.set('offset', String(Math.max(0, off)));
    return '/sessions?' + p;
  };
  const pager = h('nav', { class: 'pager', 'aria-label': 'pages of sessions' },
    h('span', { class: 'muted' }, `${fmtCount(from)}–${fmtCount(to)}${total} · ${Math.round(took)} ms`),
    offset > 0 ? h('a', { href: link(offset - limit), class: 'button', rel: 'prev' }, '← Newer') : '',
    page.more ? h('a', { href: link(offset + limit), class: 'button', rel: 'next' }, 'Older →') : '');
  if (page.sessions.length === 0) {
    main.append(h('p', { class: 'empty' }, query.toString() ? 'No session matches these filters.' : 'No sessions recorded yet. Point an MCP client at the recording proxy.'));
  } else {
    main.append(pager, h('div', { class: 'scroll' }, tbl), pager.cloneNode(true));
  }
}
