// /live: messages as they are recorded, from the dashboard's SSE feed.

import { h, chip, clipped, cls, dirArrow, fmtBytes, fmtClock, fmtCount, messagePath, sessionPath } from '../dom.js';

const MAX_ROWS = 500;

export function livePage({ main, query }) {
  document.title = 'Live · mcptape';
  const filter = h('input', { type: 'search', placeholder: 'only methods containing…', value: query.get('method') || '', 'aria-label': 'method filter' });
  const state = h('span', { class: 'chip live-state' }, 'connecting');
  let paused = false;
  const pause = h('button', { type: 'button', onclick: () => { paused = !paused; pause.textContent = paused ? 'Resume' : 'Pause'; } }, 'Pause');
  const tbody = h('tbody');
  const sessions = new Map();
  const sessionList = h('ul', { class: 'live-sessions' });
  const counter = h('span', { class: 'muted' }, '0 messages');
  let count = 0;
  main.append(h('h1', {}, 'Live'),
    h('div', { class: 'row-actions' }, state, filter, pause, counter),
    h('div', { class: 'live-layout' },
      h('div', { class: 'scroll' }, h('table', { class: 'grid live' },
        h('thead', {}, h('tr', {}, ['Time', 'Session', '', 'Kind', 'Method', 'Name', 'Size', 'Seq'].map((x) => h('th', { scope: 'col' }, x)))),
        tbody)),
      h('div', {}, h('h2', {}, 'Sessions'), sessionList)));

  const es = new EventSource('/api/v1/live');
  es.addEventListener('open', () => { state.textContent = 'live'; state.className = 'chip live-state ok'; });
  es.addEventListener('error', () => { state.textContent = 'reconnecting'; state.className = 'chip live-state warn'; });
  es.addEventListener('lagged', () => {
    main.prepend(h('p', { class: 'warn', role: 'alert' }, 'The live tail fell behind and skipped messages; the sessions list has everything.'));
  });
  es.addEventListener('message', (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch { return; }
    count++;
    counter.textContent = `${fmtCount(count)} messages`;
    if (paused) return;
    const f = filter.value.trim();
    if (f && !(m.method || '').includes(f)) return;
    tbody.prepend(h('tr', { class: 'live-row kind-' + cls(m.kind), 'data-seq': String(m.seq) },
      h('td', { class: 'nowrap' }, fmtClock(m.time)),
      h('td', {}, h('a', { href: sessionPath(m.session), class: 'mono' }, clipped(m.session, 40))),
      h('td', {}, dirArrow(m.dir)),
      h('td', {}, m.kind),
      h('td', { class: 'method' }, clipped(m.method || '', 80)),
      h('td', {}, clipped(m.name || '', 80)),
      h('td', { class: 'num' }, fmtBytes(m.size)),
      h('td', {}, h('a', { href: messagePath(m.session, m.seq) }, `#${m.seq}`))));
    while (tbody.children.length > MAX_ROWS) tbody.lastElementChild.remove();
  });
  es.addEventListener('session', (ev) => {
    let s;
    try { s = JSON.parse(ev.data); } catch { return; }
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
  });
  return () => es.close();
}
