// /live: messages as they are recorded, from the live tail (tail.js),
// starting with the latest ones recorded before the page opened. Errors
// stand out; a filter by kind and one by method narrow the list.

import { h, chip, clipped, cls, dirArrow, fmtBytes, fmtClock, fmtCount, messagePath, sessionPath } from '../dom.js';
import { api } from '../api.js';
import { onTail } from '../tail.js';

const MAX_ROWS = 500;

// KINDS are the filter's choices: what a row must be to show.
const KINDS = [
  ['', 'all kinds'],
  ['request', 'requests'],
  ['notification', 'notifications'],
  ['result', 'results'],
  ['errors', 'errors only'],
  ['s2c-request', 'server → client requests'],
];

function matchesKind(m, k) {
  switch (k) {
    case '': return true;
    case 'errors': return !!m.error;
    case 's2c-request': return m.kind === 'request' && m.dir === 's2c';
    default: return m.kind === k;
  }
}

export async function livePage({ main, query, signal }) {
  document.title = 'Live · mcptape';
  const filter = h('input', { type: 'search', placeholder: 'only methods containing…', value: query.get('method') || '', 'aria-label': 'method filter' });
  const kind = h('select', { 'aria-label': 'kind filter', class: 'kind-filter' }, KINDS.map(([v, t]) => h('option', { value: v, selected: (query.get('kind') || '') === v }, t)));
  const state = h('span', { class: 'chip live-state' }, 'connecting');
  let paused = false;
  const pause = h('button', { type: 'button', onclick: () => { paused = !paused; pause.textContent = paused ? 'Resume' : 'Pause'; } }, 'Pause');
  const tbody = h('tbody');
  const sessions = new Map();
  const sessionList = h('ul', { class: 'live-sessions' });
  const counter = h('span', { class: 'muted' }, '0 messages');
  const empty = h('div', { class: 'empty live-empty', hidden: true });
  let count = 0;
  let last = 0; // the newest seq shown, so the feed does not repeat the backlog
  const rows = [];
  main.append(h('h1', {}, 'Live'),
    h('div', { class: 'row-actions' }, state, kind, filter, pause, counter),
    empty,
    h('div', { class: 'live-layout' },
      h('div', { class: 'scroll' }, h('table', { class: 'grid live' },
        h('thead', {}, h('tr', {}, ['Time', 'Session', '', 'Kind', 'Method', 'Name', 'Size', 'Seq'].map((x) => h('th', { scope: 'col' }, x)))),
        tbody)),
      h('div', {}, h('h2', {}, 'Sessions'), sessionList)));

  const visible = (m) => {
    const f = filter.value.trim();
    return matchesKind(m, kind.value) && (!f || (m.method || '').includes(f));
  };
  const refilter = () => {
    for (const [tr, m] of rows) tr.hidden = !visible(m);
  };
  filter.addEventListener('input', refilter);
  kind.addEventListener('change', refilter);

  const addRow = (m) => {
    if (m.seq <= last) return;
    last = m.seq;
    count++;
    counter.textContent = `${fmtCount(count)} messages`;
    const tr = h('tr', { class: 'live-row kind-' + cls(m.kind) + (m.error ? ' is-error' : ''), 'data-seq': String(m.seq), 'data-kind': m.kind },
      h('td', { class: 'nowrap' }, fmtClock(m.time)),
      h('td', {}, h('a', { href: sessionPath(m.session), class: 'mono' }, clipped(m.session, 40))),
      h('td', {}, dirArrow(m.dir)),
      h('td', {}, m.kind, m.error ? [' ', chip(m.kind === 'error' ? 'error' : 'isError', 'bad')] : ''),
      h('td', { class: 'method' }, clipped(m.method || '', 80)),
      h('td', {}, clipped(m.name || '', 80)),
      h('td', { class: 'num' }, fmtBytes(m.size)),
      h('td', {}, h('a', { href: messagePath(m.session, m.seq) }, `#${m.seq}`)));
    tr.hidden = !visible(m);
    tbody.prepend(tr);
    rows.unshift([tr, m]);
    while (rows.length > MAX_ROWS) rows.pop()[0].remove();
    empty.hidden = true;
  };
  const addSession = (s) => {
    let li = sessions.get(s.id);
    const body = [h('a', { href: sessionPath(s.id), class: 'mono' }, clipped(s.id, 40)), ' ',
      chip(s.status, 'status-' + cls(s.status)), ` ${fmtCount(s.messages)} messages, ${fmtCount(s.calls)} calls`,
      s.errors ? h('span', { class: 'bad' }, `, ${fmtCount(s.errors)} errors`) : ''];
    if (!li) {
      li = h('li', {});
      sessions.set(s.id, li);
      sessionList.prepend(li);
    }
    li.replaceChildren(...body);
  };

  // What was recorded before the page opened.
  let proxy = '';
  try {
    const recent = await api('/live/recent', { signal });
    proxy = recent.proxy || '';
    for (const s of recent.sessions.slice().reverse()) addSession(s);
    for (const m of recent.messages) addRow(m);
  } catch (e) {
    if (e.name === 'AbortError') return undefined;
  }
  if (count === 0) {
    empty.replaceChildren(h('p', {}, 'Nothing recorded yet.'),
      proxy ? h('p', {}, 'Point an MCP client at the recording proxy: ', h('code', { class: 'proxy-url' }, proxy + '/…'),
        ' (the upstream server\'s path, e.g. ', h('code', {}, proxy + '/mcp'), '), instead of at the server itself. Messages appear here as they cross it.') :
        h('p', {}, 'This dashboard shows a store that nothing records into right now. To record, run ',
          h('code', {}, 'mcptape record --upstream SERVER_URL'), ' and point your MCP client at the address it prints; its own dashboard shows the traffic live.'));
    empty.hidden = false;
  } else {
    empty.hidden = true;
  }

  const stops = [
    onTail('state', (st) => {
      state.textContent = st;
      state.className = 'chip live-state ' + (st === 'live' ? 'ok' : st === 'reconnecting' ? 'warn' : '');
    }),
    onTail('lagged', () => {
      main.prepend(h('p', { class: 'warn', role: 'alert' }, 'The live tail fell behind and skipped messages; the sessions list has everything.'));
    }),
    onTail('message', (m) => {
      if (paused || m.kind === 'frame') return;
      addRow(m);
    }),
    onTail('session', addSession),
  ];
  return () => { for (const stop of stops) stop(); };
}
