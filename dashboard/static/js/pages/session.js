// /sessions/{id}: the session's facts and actions, its server's stderr
// (a stdio session), and its causal tree (render/tree.js). The page keeps
// up with the session as traffic arrives (the live tail): new calls are
// added below, answered ones redrawn where they are, the facts updated,
// and what the user reads does not move. The filter box searches the
// messages' content too (params, results, errors); ?q= fills it and opens
// the first hit. Keyboard: arrows move and open/close, Enter opens the
// message, Home/End jump; in the page, / filters, e and f go to the next
// error and finding (E and F back), * opens every node and - closes them.

import { h, chip, clipped, cls, copyButton, fmtCount, fmtMs, fmtTime, kv, section, via } from '../dom.js';
import { api, info, enc } from '../api.js';
import { navigate, status, setKeys } from '../nav.js';
import { onTail } from '../tail.js';
import { buildTree, focusItem, matchesRoot, OPEN_NESTED } from '../render/tree.js';

export async function sessionPage({ params, main, signal, query, saved, keep }) {
  const id = params[0];
  const base = '/sessions/' + enc(id);
  const [detail, tree, features] = await Promise.all([
    api(base, { signal }), api(base + '/tree', { signal }), info().then((i) => i.features)]);
  let s = detail.session;
  if (s.id !== id) {
    // An id given by its start: the address names the whole id.
    history.replaceState(history.state, '', '/sessions/' + enc(s.id) + location.search);
  }
  const sbase = '/sessions/' + enc(s.id);
  document.title = `Session ${s.id} · mcptape`;

  const factsBox = h('div');
  const drawFacts = (treeAnswer) => factsBox.replaceChildren(facts(s, treeAnswer));
  drawFacts(tree);
  main.append(h('h1', {}, 'Session ', h('span', { class: 'mono' }, clipped(s.id, 80))));
  main.append(h('div', { class: 'facts' }, factsBox, actions(detail, features)));
  const stderrBox = h('div');
  const drawStderr = (treeAnswer) => stderrBox.replaceChildren(stderrSection(s, treeAnswer));
  drawStderr(tree);
  main.append(stderrBox);

  const ctl = buildTree(tree, s);
  const treeEl = ctl.el;
  const tools = treeTools(ctl, s, query.get('q') || (saved && saved.q) || '', signal);
  const heading = h('h2', {});
  const drawHeading = (t) => {
    const { calls, notes } = counts(t);
    heading.textContent = `Calls and notifications (${fmtCount(calls)} call${calls === 1 ? '' : 's'}, ${fmtCount(notes)} other)`;
  };
  drawHeading(tree);
  const found = tree.tree.findings || 0;
  const unanswered = tree.tree.unanswered || 0;
  main.append(h('section', { class: 'panel' }, heading,
    h('p', { class: 'muted small' }, 'Click ▸ or use the arrow keys to open a node; Enter opens its message; press ? for every key. ',
      `${fmtCount(found)} finding${found === 1 ? '' : 's'} recorded`, unanswered ? `, and ${fmtCount(unanswered)} request${unanswered === 1 ? '' : 's'} never answered` : '', '. ',
      h('a', { href: '/latency?session=' + enc(s.id) }, 'Latency of this session')),
    tools.el,
    treeEl));
  if (saved) ctl.restore(saved);
  keep(() => ({ ...ctl.keep(), q: tools.query() }));
  setKeys([
    ['/', 'filter the calls (by method, tool, and the messages’ content)'],
    ['e / E', 'next / previous error'], ['f / F', 'next / previous finding'],
    ['*', 'open every node'], ['-', 'close every node'],
    ['↑ ↓', 'move in the tree'], ['→ ←', 'open / close a node'], ['Home / End', 'first / last node'],
    ['Enter', 'open the node’s message'], ['Space', 'open or close a node'],
  ]);
  treeEl.setAttribute('data-ready', '');
  // For the render benchmark: the tree is in the page, then on screen
  // (after the next frame is painted).
  performance.mark('mcptape:tree-ready');
  requestAnimationFrame(() => setTimeout(() => performance.mark('mcptape:tree-painted'), 0));
  await tools.ready(!saved);

  // Keeping up: the live tail says when the session got messages or
  // changed; the tree is fetched again (at most once a second) and merged.
  let timer = 0;
  let last = 0;
  let busy = false;
  const refresh = async () => {
    timer = 0;
    if (busy) { timer = setTimeout(refresh, 500); return; }
    busy = true;
    last = Date.now();
    try {
      const t = await api(sbase + '/tree', { signal });
      ctl.update(t, s);
      drawHeading(t);
      drawFacts(t);
      drawStderr(t);
      tools.refilter();
      treeEl.dataset.updated = String((Number(treeEl.dataset.updated) || 0) + 1);
    } catch (e) {
      if (e.name !== 'AbortError') status(e.message, 'bad');
    } finally {
      busy = false;
    }
  };
  // A big tree is fetched less often: once a second up to 5,000 calls,
  // then a second more for each 5,000.
  const every = () => 1000 * Math.max(1, Math.ceil(ctl.roots.length / 5000));
  const soon = () => {
    if (timer) return;
    timer = setTimeout(refresh, Math.max(150, every() - (Date.now() - last)));
  };
  const stops = [
    onTail('message', (m) => { if (m.session === s.id) soon(); }),
    onTail('session', (row) => {
      if (row.id !== s.id) return;
      s = { ...s, ...row, labels: s.labels };
      soon();
    }),
  ];
  return () => {
    for (const stop of stops) stop();
    clearTimeout(timer);
    tools.cleanup();
  };
}

// counts are the tree's calls (client requests, a 2026-07-28 call's
// rounds folded into it) and its other roots (notifications, requests of
// the server, stray messages).
function counts(t) {
  let calls = 0;
  for (const n of t.tree.roots) if (n.kind === 'call') calls++;
  return { calls, notes: t.tree.roots.length - calls };
}

function facts(s, t) {
  const client = [s.client.name, s.client.version].filter(Boolean).join(' ');
  const server = [s.server.name, s.server.version].filter(Boolean).join(' ');
  const { calls } = counts(t);
  return kv([
    ['Era', [s.era, s.version ? ' ' + s.version : '', s.opening ? h('span', { class: 'muted' }, ` (${s.opening})`) : '']],
    ['Client', clipped(client || '—', 120)],
    ['Server', clipped(server || '—', 120)],
    ['Via', via(s)],
    s.command
      ? ['Command', [h('code', {}, clipped((s.command.args || []).join(' '), 300)),
        s.command.dir ? h('span', { class: 'muted' }, ' in ', clipped(s.command.dir, 120)) : '']]
      : ['Upstream', h('code', {}, clipped((s.upstream || '') + (s.path || ''), 200))],
    s.command ? ['Exit', h('span', { class: 'exit' + (s.command.exit && !/code 0\b/.test(s.command.exit) ? ' bad' : '') },
      s.command.exit || (s.status === 'open' ? 'still running' : 'not recorded'))] : null,
    ['Start', fmtTime(s.start)],
    ['Duration', fmtMs(s.durationMs)],
    ['Messages', `${fmtCount(s.messages)} in ${fmtCount(s.exchanges)} exchanges`],
    ['Calls', h('span', { class: 'calls', title: s.calls !== calls ? `${fmtCount(s.calls)} client requests in all: a 2026-07-28 call's retry rounds count as one call here` : undefined }, fmtCount(calls))],
    ['Errors', h('span', { class: s.errors ? 'bad' : '' }, fmtCount(s.errors))],
    ['Findings', h('span', { class: s.findings ? 'warn' : '' }, fmtCount(s.findings))],
    ['Status', [chip(s.status, 'status-' + cls(s.status)), s.lost ? ` ${s.lost} records lost: ${s.lossReason}` : '']],
  ]);
}

// stderrSection shows what a stdio server wrote to its standard error,
// with how it ended.
function stderrSection(s, t) {
  const lines = t.stderr || [];
  if (!s.command && !lines.length) return '';
  const more = t.stderrMore || 0;
  const exit = s.command && s.command.exit ? s.command.exit : s.status === 'open' ? 'still running' : '';
  return section(`Standard error (${fmtCount(lines.length + more)} line${lines.length + more === 1 ? '' : 's'})`,
    exit ? h('p', { class: 'stderr-exit' }, 'The server process: ', h('strong', {}, exit)) : '',
    lines.length ? h('pre', { class: 'raw stderr-lines' }, lines.map((l) => [h('span', { class: 'muted' }, fmtTime(l.time).slice(11), ' '), clipped(l.text, 2000), '\n'])) :
      h('p', { class: 'muted' }, 'The server wrote nothing to its standard error.'),
    more ? h('p', { class: 'muted small' }, `… and ${fmtCount(more)} earlier lines (the last ${fmtCount(lines.length)} are shown).`) : '');
}

function actions(detail, features) {
  const s = detail.session;
  const base = '/api/v1/sessions/' + enc(s.id);
  const box = h('div', { class: 'actions-box' });

  // Labels.
  if (features.edit) {
    const input = h('input', { type: 'text', name: 'labels', value: s.labels.join(', '), placeholder: 'bug-123, fixture', 'aria-label': 'labels, comma separated' });
    const chips = h('span', { class: 'labels' }, s.labels.map((l) => chip(l, 'label')));
    const save = h('button', {
      type: 'button',
      onclick: async () => {
        try {
          const res = await api('/sessions/' + enc(s.id) + '/labels', { method: 'PUT', body: { labels: input.value.split(',') } });
          chips.replaceChildren(...res.labels.map((l) => chip(l, 'label')));
          input.value = res.labels.join(', ');
          status('Labels saved', 'ok');
        } catch (e) { status(e.message, 'bad'); }
      },
    }, 'Save labels');
    box.append(h('div', { class: 'row-actions' }, h('span', { class: 'muted' }, 'Labels: '), chips, input, save));
  }

  // Export.
  const dl = [];
  if (features.export) dl.push(h('a', { class: 'button', href: base + '/tape', download: detail.replay.tape }, 'Export tape'));
  dl.push(h('a', { class: 'button', href: base + '/har', download: '' }, 'Export HAR'));
  box.append(h('div', { class: 'row-actions' }, dl));

  // Replay.
  const replay = h('div', { class: 'replay' },
    h('div', { class: 'muted small' }, s.command ? 'Replay this session as a stand-in stdio server (the command a client config launches in place of the server):' : 'Replay this session as a stand-in server:'),
    h('pre', { class: 'command' }, detail.replay.export + '\n' + detail.replay.replay),
    copyButton('Copy command', detail.replay.command));
  if (detail.replay.canStart) {
    const running = h('ul', { class: 'replay-servers' });
    const addServer = (url) => {
      const stop = h('button', { type: 'button', class: 'stop-replay' }, 'Stop');
      const li = h('li', { class: 'replay-url', 'data-url': url }, 'Replay server at ', h('code', {}, url), ' ', copyButton('Copy URL', url), ' ',
        detail.replay.canStop ? stop : '');
      stop.addEventListener('click', async () => {
        stop.disabled = true;
        try {
          await api('/sessions/' + enc(s.id) + '/replay?url=' + enc(url), { method: 'DELETE' });
          li.remove();
          status('Replay server stopped', 'ok');
        } catch (err) {
          status(err.message, 'bad');
          stop.disabled = false;
        }
      });
      running.append(li);
    };
    for (const url of detail.replay.running || []) addServer(url);
    replay.append(h('button', {
      type: 'button', class: 'start-replay',
      onclick: async (e) => {
        e.target.disabled = true;
        try {
          const res = await api('/sessions/' + enc(s.id) + '/replay', { method: 'POST' });
          addServer(res.url);
        } catch (err) { status(err.message, 'bad'); }
        e.target.disabled = false;
      },
    }, 'Start replay server'), running);
  }
  box.append(replay);

  // Delete, in two steps.
  {
    const del = h('button', { type: 'button', class: 'danger' }, 'Delete session');
    let armed = false;
    del.addEventListener('click', async () => {
      if (!armed) {
        armed = true;
        del.textContent = s.status === 'open' ? 'Really delete? (still recording: new traffic brings it back)' : 'Really delete?';
        setTimeout(() => { armed = false; del.textContent = 'Delete session'; }, 5000);
        return;
      }
      try {
        await api('/sessions/' + enc(s.id), { method: 'DELETE' });
        status('Session deleted', 'ok');
        navigate('/sessions');
      } catch (e) { status(e.message, 'bad'); }
    });
    box.append(h('div', { class: 'row-actions' }, del));
  }
  return box;
}

// treeTools are the filter box (over what the tree shows and, through
// the server, the messages' content), next error and next finding,
// expand and collapse all, and the setting to open calls with nested
// server requests, with their keys (/, e, f, E, F, *, -).
function treeTools(ctl, s, initial, signal) {
  const tree = ctl.el;
  const input = h('input', { type: 'search', class: 'tree-filter', placeholder: 'Filter: method, tool, or text in the messages (press /)', 'aria-label': 'filter the calls', autocomplete: 'off', value: initial });
  const count = h('span', { class: 'muted small filter-count', role: 'status' });
  // at is the root the tree's focus is on, or was on when a button (or
  // the filter box) took it: the next jump steps on from there.
  let at = null;
  tree.addEventListener('focusin', (e) => {
    const li = e.target.closest('[role=tree] > li[role=treeitem]');
    if (li) at = li;
  });
  const jump = (attr, dir) => {
    const items = [...tree.children].filter((li) => li.getAttribute('role') === 'treeitem' && !li.classList.contains('filtered-out'));
    // From nowhere, forward starts at the first root and back at the last.
    let i = at && items.includes(at) ? items.indexOf(at) : dir > 0 ? -1 : items.length;
    for (let k = 0; k < items.length; k++) {
      i = (i + dir + items.length) % items.length;
      if (items[i].hasAttribute(attr)) {
        const li = items[i];
        // Open it when what it is about lies below it.
        const n = li._node;
        const own = attr === 'data-errors' ? (n.status === 'error' || n.status === 'isError') : (n.findings || []).some((f) => f.kind !== 'redacted');
        if (!own) li._open(true);
        focusItem(tree, li);
        li.scrollIntoView({ block: 'center' });
        count.textContent = '';
        return;
      }
    }
    count.textContent = attr === 'data-errors' ? 'No errors.' : 'No findings.';
  };
  const button = (cls, title, label, onclick) => h('button', { type: 'button', class: cls, title, onclick }, label);
  let nested = false;
  try { nested = localStorage.getItem(OPEN_NESTED) === '1'; } catch { nested = false; }
  const openNested = h('input', { type: 'checkbox', class: 'open-nested', checked: nested });
  openNested.addEventListener('change', () => {
    try { localStorage.setItem(OPEN_NESTED, openNested.checked ? '1' : '0'); } catch { /* private mode */ }
    ctl.setOpenNested(openNested.checked);
  });

  // The filter: what the tree shows at once, and the server's search of
  // the messages' content as it comes.
  let q = '';
  let seqs = new Set();
  let hits = 0;
  let asked = null;
  const apply = () => {
    const shown = ctl.filter((n) => matchesRoot(n, q, seqs));
    const total = ctl.roots.length;
    count.textContent = q ? `${fmtCount(shown)} of ${fmtCount(total)} shown${hits ? ` · ${fmtCount(hits)} message${hits === 1 ? '' : 's'} hold “${q}”` : ''}` : '';
    return shown;
  };
  const search = async (text) => {
    q = text.trim().toLowerCase();
    if (asked) asked.abort();
    seqs = new Set();
    hits = 0;
    apply();
    if (q.length < 2) return;
    const mine = new AbortController();
    asked = mine;
    signal.addEventListener('abort', () => mine.abort(), { once: true });
    try {
      const r = await api(`/sessions/${enc(s.id)}/search?q=${enc(text.trim())}`, { signal: mine.signal });
      if (asked !== mine) return;
      seqs = new Set(r.seqs);
      hits = r.seqs.length;
      apply();
      if (r.more) count.append(` (the first ${fmtCount(hits)})`);
    } catch (e) {
      if (e.name !== 'AbortError') count.textContent = e.message;
    }
  };
  let timer;
  input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(() => search(input.value), 150); });
  const onKey = (e) => {
    if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
    const t = e.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
    switch (e.key) {
      case '/': input.focus(); break;
      case 'e': jump('data-errors', 1); break;
      case 'E': jump('data-errors', -1); break;
      case 'f': jump('data-findings', 1); break;
      case 'F': jump('data-findings', -1); break;
      case '*': ctl.expandAll(); break;
      case '-': ctl.collapseAll(); break;
      default: return;
    }
    e.preventDefault();
  };
  document.addEventListener('keydown', onKey);
  return {
    el: h('div', { class: 'tree-tools' }, input,
      button('next-error', 'next error (e; E goes back)', 'Next error', () => jump('data-errors', 1)),
      button('next-finding', 'next finding (f; F goes back)', 'Next finding', () => jump('data-findings', 1)),
      button('expand-all', 'open every node (*)', 'Expand all', () => ctl.expandAll()),
      button('collapse-all', 'close every node (-)', 'Collapse all', () => ctl.collapseAll()),
      h('label', { class: 'small', title: 'remembered in this browser' }, openNested, ' Open calls with nested server requests'),
      count),
    query: () => input.value,
    refilter: () => { if (q) apply(); },
    // ready applies the filter the page opened with; with open, it opens
    // the first hit (a query carried from the sessions list).
    ready: async (open) => {
      if (!initial.trim()) return;
      await search(initial);
      if (!open) return;
      if (!(seqs.size && ctl.reveal(seqs))) {
        const li = [...tree.children].find((x) => x.getAttribute('role') === 'treeitem' && !x.classList.contains('filtered-out'));
        if (li) { focusItem(tree, li); li.scrollIntoView({ block: 'center' }); }
      }
    },
    cleanup: () => { document.removeEventListener('keydown', onKey); clearTimeout(timer); if (asked) asked.abort(); },
  };
}
