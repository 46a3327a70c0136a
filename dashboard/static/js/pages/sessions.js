// /sessions: every session, newest first (or sorted by a column), filtered
// and paged; the filters live in the query string, so a filtered list is a
// link. With text to find, the messages that hold it are listed above the
// sessions. The list keeps up with what is recorded while it is open.

import { h, chip, clipped, cls, dirArrow, fmtCount, fmtMs, fmtTime, messagePath, sessionPath, via } from '../dom.js';
import { api } from '../api.js';
import { onTail } from '../tail.js';

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
    field('q', 'Text in the messages', text('q', 'e.g. Paris')),
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

// sessionRow is one session as a row; q, when given, goes with the link
// into the session page (which opens the first hit).
export function sessionRow(s, q = '', labels = true) {
  const client = [s.client.name, s.client.version].filter(Boolean).join(' ');
  const server = [s.server.name, s.server.version].filter(Boolean).join(' ');
  const href = sessionPath(s.id) + (q ? '?q=' + encodeURIComponent(q) : '');
  const cut = (text, cls, title = text) => h('td', { class: 'cut ' + cls }, h('span', { title }, text));
  const how = s.leg && s.leg !== 'reverse' || s.route ? ` · ${via(s)}` : '';
  return h('tr', { 'data-session': s.id, 'data-key': 's' + s.id },
    h('td', { class: 'id' }, h('a', { href, class: 'mono' }, clipped(s.id, 60))),
    cut(s.era + how, 'era', [s.era, s.version].filter(Boolean).join(' ') + how),
    cut(client || '—', 'client'),
    cut(server || '—', 'server'),
    h('td', { class: 'nowrap', title: fmtTime(s.start) }, shortTime(s.start)),
    h('td', { class: 'num' }, fmtMs(s.durationMs)),
    h('td', { class: 'num' }, fmtCount(s.calls)),
    h('td', { class: 'num' + (s.errors ? ' bad' : '') }, fmtCount(s.errors)),
    h('td', { class: 'num' + (s.findings ? ' warn' : '') }, fmtCount(s.findings)),
    h('td', { class: 'nowrap' }, chip(s.status, 'status-' + cls(s.status)), s.lost ? chip(`${s.lost} lost`, 'bad') : ''),
    labels ? h('td', { class: 'cut labels' }, h('span', {}, (s.labels || []).map((l) => chip(l, 'label')))) : '');
}

// shortTime is a start time as short as it reads: without the year in
// this year (the whole time is the cell's title).
function shortTime(t) {
  const full = fmtTime(t);
  return full.startsWith(String(new Date().getFullYear()) + '-') ? full.slice(5) : full;
}

// COLUMNS are the table's columns and the sort each header asks for.
const COLUMNS = [['Session', 'session'], ['Era', 'era'], ['Client', 'client'], ['Server', 'server'], ['Start', 'start'],
  ['Duration', 'duration'], ['Calls', 'calls'], ['Errors', 'errors'], ['Findings', 'findings'], ['Status', 'status'], ['Labels', '']];

// passes says whether a session recorded while the page is open belongs
// in the list as filtered: only the filters the page can check itself
// (status, era, findings, label) are checked; a list with the others, or
// sorted, or paged on, says that new sessions came instead.
function passes(s, query) {
  const st = query.get('status');
  if (st === 'errors' ? !s.errors : st === 'ok' ? s.errors || s.status === 'incomplete' : st && s.status !== st) return false;
  if (query.get('era') && s.era !== query.get('era')) return false;
  if (query.get('findings') === '1' && !s.findings) return false;
  if (query.get('findings') === '0' && s.findings) return false;
  if (query.get('label') && !(s.labels || []).includes(query.get('label'))) return false;
  return true;
}

export async function sessionsPage({ query, main, signal, navigate }) {
  document.title = 'Sessions · mcptape';
  main.append(h('h1', {}, 'Sessions'), filterForm(query, navigate));
  const q = new URLSearchParams();
  for (const name of FILTERS) if (query.get(name)) q.set(name, query.get(name));
  const limit = Math.min(500, Math.max(1, parseInt(query.get('limit') || '50', 10) || 50));
  const offset = Math.max(0, parseInt(query.get('offset') || '0', 10) || 0);
  const sort = query.get('sort') || '';
  const order = query.get('order') || '';
  q.set('limit', String(limit));
  q.set('offset', String(offset));
  if (sort) q.set('sort', sort);
  if (order) q.set('order', order);
  const text = (query.get('q') || '').trim();
  const started = performance.now();
  const [page, hits] = await Promise.all([api('/sessions?' + q, { signal }),
    text ? api('/search?q=' + encodeURIComponent(text), { signal }).catch(() => null) : null]);
  const took = performance.now() - started;

  if (hits) main.append(messageHits(text, hits));
  const link = (p) => '/sessions?' + p;
  const sortLink = (key) => {
    const p = new URLSearchParams(query);
    p.delete('offset');
    const now = page.sort === key ? page.order : '';
    // A column sorts descending first (the most calls, the newest), then
    // ascending; the session id and names ascending first.
    const first = ['session', 'era', 'client', 'server', 'status'].includes(key) ? 'asc' : 'desc';
    const next = now ? (now === 'asc' ? 'desc' : 'asc') : first;
    if (key === 'start' && next === 'desc') { p.delete('sort'); p.delete('order'); } else { p.set('sort', key); p.set('order', next); }
    return link(p);
  };
  // Labels get a column when a session of the page has some.
  const withLabels = page.sessions.some((s) => s.labels.length);
  const tbody = h('tbody', {}, page.sessions.map((s) => sessionRow(s, text, withLabels)));
  const tbl = h('table', { class: 'grid sessions', 'data-ready': '' },
    h('thead', {}, h('tr', {}, COLUMNS.filter(([label]) => withLabels || label !== 'Labels').map(([label, key]) => {
      const on = page.sort === key;
      return h('th', { scope: 'col', 'aria-sort': on ? (page.order === 'asc' ? 'ascending' : 'descending') : undefined, class: 'col-' + (key || 'labels') },
        key ? h('a', { href: sortLink(key), class: 'sort', title: `sort by ${label.toLowerCase()}` }, label, on ? (page.order === 'asc' ? ' ▲' : ' ▼') : '') : label);
    }))),
    tbody);
  const from = page.sessions.length ? offset + 1 : 0;
  const to = offset + page.sessions.length;
  const total = page.total >= 0 ? ` of ${fmtCount(page.total)}` : '';
  const pageLink = (off) => {
    const p = new URLSearchParams(query);
    p.set('offset', String(Math.max(0, off)));
    return link(p);
  };
  const pager = h('nav', { class: 'pager', 'aria-label': 'pages of sessions' },
    h('span', { class: 'muted' }, `${fmtCount(from)}–${fmtCount(to)}${total} · ${Math.round(took)} ms`, page.capped ? ' · sorted among the newest 20,000' : ''),
    offset > 0 ? h('a', { href: pageLink(offset - limit), class: 'button', rel: 'prev' }, '← Newer') : '',
    page.more ? h('a', { href: pageLink(offset + limit), class: 'button', rel: 'next' }, 'Older →') : '');
  const empty = h('p', { class: 'empty' }, query.toString() ? 'No session matches these filters.' : 'No sessions recorded yet. Point an MCP client at the recording proxy.');
  const fresh = h('p', { class: 'fresh', role: 'status', hidden: true });
  main.append(fresh);
  if (page.sessions.length === 0) main.append(empty);
  const listing = h('div', { hidden: page.sessions.length === 0 }, pager, h('div', { class: 'scroll' }, tbl), pager.cloneNode(true));
  main.append(listing);

  // Keeping up: sessions recorded or changed while the page is open. A
  // row on screen is redrawn where it is; a new session joins the top of
  // the first page of the list as it is sorted by default (the browser
  // keeps what is on screen in place: scroll anchoring); elsewhere the
  // page says how many came, with a link that shows them.
  const live = offset === 0 && !sort && !text && !query.get('method') && !query.get('tool') && !query.get('since') && !query.get('until');
  let missed = 0;
  const stop = onTail('session', (s) => {
    const tr = tbody.querySelector(`tr[data-session="${CSS.escape(s.id)}"]`);
    if (tr) {
      const labels = [...tr.querySelectorAll('.chip.label')].map((c) => c.textContent);
      tr.replaceWith(sessionRow({ ...s, labels }, text, withLabels));
      return;
    }
    if (live) {
      if (!passes(s, query)) return;
      tbody.prepend(sessionRow({ ...s, labels: s.labels || [] }, text, withLabels));
      tbl.dataset.added = String((Number(tbl.dataset.added) || 0) + 1);
      // A list left open for long keeps a page and a bit: the oldest rows
      // go (the next page has them).
      while (tbody.rows.length > limit + 200) tbody.lastElementChild.remove();
      empty.remove();
      listing.hidden = false;
      return;
    }
    missed++;
    fresh.hidden = false;
    fresh.replaceChildren(`${fmtCount(missed)} session${missed === 1 ? '' : 's'} recorded or changed since this list was drawn. `,
      h('a', { href: location.pathname + location.search, class: 'show-new' }, 'Show the list as it is now'));
  });
  return stop;
}

// messageHits lists the messages that hold the text, each a link to its
// message, with the text around the match.
function messageHits(text, hits) {
  const sec = h('section', { class: 'panel message-hits' },
    h('h2', {}, `Messages that hold “`, clipped(text, 80), `” (${fmtCount(hits.messages.length)}${hits.more ? '+' : ''})`));
  if (!hits.messages.length) {
    sec.append(h('p', { class: 'muted' }, 'No message holds it.'));
    return sec;
  }
  sec.append(h('div', { class: 'scroll' }, h('table', { class: 'grid hits' },
    h('thead', {}, h('tr', {}, ['Time', 'Session', '', 'Message', 'Where the text is'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, hits.messages.map((m) => h('tr', { 'data-seq': String(m.seq) },
      h('td', { class: 'nowrap' }, fmtTime(m.time)),
      h('td', { class: 'id' }, h('a', { href: sessionPath(m.session) + '?q=' + encodeURIComponent(text), class: 'mono' }, clipped(m.session, 60)),
        m.client ? h('span', { class: 'muted small' }, ' ', clipped(m.client, 40)) : ''),
      h('td', {}, dirArrow(m.dir)),
      h('td', { class: 'nowrap' }, h('a', { href: messagePath(m.session, m.seq), class: 'hit-link' }, `#${m.seq} `, m.method || m.kind, m.name ? ` ${m.name}` : '')),
      h('td', {}, h('code', { class: 'snippet' }, clipped(m.snippet, 400)))))))),
  hits.more ? h('p', { class: 'muted small' }, 'More messages hold it: narrow the search, or filter the sessions below.') : '');
  return sec;
}
