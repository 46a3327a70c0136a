// /sessions/{id}: the session's facts and actions, and its causal tree:
// each call with what it set off (sampling, elicitation and roots requests,
// MRTR rounds, tool loops, notifications), expandable, with relative
// timings and status and finding chips. Keyboard: arrows move and
// open/close, Enter opens the message, Home/End jump.

import { h, add, chip, clipped, cls, copyButton, dirArrow, fmtCount, fmtMs, fmtTime, kv, messagePath, ms, nsToMs, section } from '../dom.js';
import { api, info, enc } from '../api.js';
import { navigate, status } from '../app.js';

export async function sessionPage({ params, main, signal }) {
  const id = params[0];
  const base = '/sessions/' + enc(id);
  const [detail, tree, features] = await Promise.all([
    api(base, { signal }), api(base + '/tree', { signal }), info().then((i) => i.features)]);
  const s = detail.session;
  document.title = `Session ${s.id} · mcptape`;
  const client = [s.client.name, s.client.version].filter(Boolean).join(' ');
  const server = [s.server.name, s.server.version].filter(Boolean).join(' ');

  main.append(h('h1', {}, 'Session ', h('span', { class: 'mono' }, clipped(s.id, 80))));
  main.append(h('div', { class: 'facts' },
    kv([
      ['Era', [s.era, s.version ? ' ' + s.version : '', s.opening ? h('span', { class: 'muted' }, ` (${s.opening})`) : '']],
      ['Client', clipped(client || '—', 120)],
      ['Server', clipped(server || '—', 120)],
      ['Upstream', h('code', {}, clipped((s.upstream || '') + (s.path || ''), 200))],
      ['Start', fmtTime(s.start)],
      ['Duration', fmtMs(s.durationMs)],
      ['Messages', `${fmtCount(s.messages)} in ${fmtCount(s.exchanges)} exchanges`],
      ['Calls', fmtCount(s.calls)],
      ['Errors', h('span', { class: s.errors ? 'bad' : '' }, fmtCount(s.errors))],
      ['Findings', h('span', { class: s.findings ? 'warn' : '' }, fmtCount(s.findings))],
      ['Status', [chip(s.status, 'status-' + cls(s.status)), s.lost ? ` ${s.lost} records lost: ${s.lossReason}` : '']],
    ]),
    actions(detail, features)));

  const treeEl = renderTree(tree, s);
  main.append(section(`Calls and notifications (${fmtCount(tree.tree.roots.length)})`,
    h('p', { class: 'muted small' }, 'Click ▸ or use the arrow keys to open a node; Enter opens its message. ',
      h('a', { href: '/latency?session=' + enc(s.id) }, 'Latency of this session')),
    treeEl));
  treeEl.setAttribute('data-ready', '');
  // For the render benchmark: the tree is in the page, then on screen
  // (after the next frame is painted).
  performance.mark('mcptape:tree-ready');
  requestAnimationFrame(() => setTimeout(() => performance.mark('mcptape:tree-painted'), 0));
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
    h('div', { class: 'muted small' }, 'Replay this session as a stand-in server:'),
    h('pre', { class: 'command' }, detail.replay.export + '\n' + detail.replay.replay),
    copyButton('Copy command', detail.replay.command));
  if (detail.replay.canStart) {
    const out = h('span', { class: 'replay-url' });
    replay.append(h('button', {
      type: 'button', class: 'start-replay',
      onclick: async (e) => {
        e.target.disabled = true;
        try {
          const res = await api('/sessions/' + enc(s.id) + '/replay', { method: 'POST' });
          out.replaceChildren('Replay server at ', h('code', {}, res.url), ' ', copyButton('Copy URL', res.url));
        } catch (err) { status(err.message, 'bad'); }
        e.target.disabled = false;
      },
    }, 'Start replay server'), out);
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

// renderTree builds the tree's top level; a node's details and children
// are built when it is first opened, so a session of thousands of calls
// renders quickly.
function renderTree(answer, s) {
  const t0 = ms(s.start);
  const edited = answer.edited || {};
  const ul = h('ul', { class: 'tree', role: 'tree', 'aria-label': 'calls of the session' });
  const roots = answer.tree.roots;
  const frag = document.createDocumentFragment();
  for (const n of roots) frag.append(item(n, 1, t0, true, s.id, edited));
  ul.append(frag);
  if (roots.length === 0) ul.append(h('li', { class: 'muted' }, 'No messages.'));
  const first = ul.querySelector('li[role=treeitem]');
  if (first) first.tabIndex = 0;
  ul.addEventListener('keydown', (e) => keyNav(e, ul, s.id));
  ul.addEventListener('click', (e) => {
    const li = e.target.closest('li[role=treeitem]');
    if (li) focusItem(ul, li, false);
  });
  return ul;
}

function title(n, round) {
  if (round) return [h('span', { class: 'method' }, `round ${round}`)];
  const out = [h('span', { class: 'method' }, n.method || n.kind)];
  if (n.name) out.push(' ', h('span', { class: 'name' }, clipped(n.name, 80)));
  if (n.key) out.push(' ', h('span', { class: 'key' }, '[', clipped(n.key, 40), ']'));
  if (n.label) out.push(' ', h('span', { class: 'label-note' }, `(${n.label})`));
  return out;
}

function item(n, level, parentStart, root, sid, edited, round) {
  const start = ms(n.start);
  const kids = [...(n.rounds || []).map((r, i) => ({ node: r, round: i + 1 })), ...(n.children || []).map((c) => ({ node: c }))];
  const li = h('li', {
    role: 'treeitem', 'aria-level': String(level), 'aria-expanded': 'false', tabindex: '-1',
    class: 'node kind-' + cls(n.kind) + (n.dir === 's2c' ? ' s2c' : ''), 'data-method': n.method || '',
    'data-seq': String(n.request || n.response || ''),
  });
  const offset = start - parentStart;
  const toggle = h('span', { class: 'toggle', 'aria-hidden': 'true' }, '▸');
  const row = h('div', { class: 'row' },
    toggle,
    h('span', { class: 'dir', title: n.dir === 'c2s' ? 'client → server' : 'server → client' }, dirArrow(n.dir)),
    h('span', { class: 'title' }, title(n, round)),
    n.status ? chip(n.status, 'status-' + cls(n.status)) : '',
    n.duration ? h('span', { class: 'dur' }, fmtMs(nsToMs(n.duration))) : '',
    h('span', { class: 'offset', title: root ? 'since the session started' : 'since the parent started' }, '+' + fmtMs(Math.max(0, offset))),
    (edited[n.request] || edited[n.response]) ? chip('edited', 'edited') : '',
    (n.findings || []).filter((f) => f.kind !== 'redacted').slice(0, 4).map((f) => chip(f.kind, 'finding')),
    kids.length ? h('span', { class: 'count muted' }, `${kids.length}`) : '',
    n.summary ? h('span', { class: 'summary' }, clipped(n.summary, 140)) : '');
  li.append(row);
  let group = null;
  li._open = (on) => {
    if (on && !group) {
      group = h('ul', { role: 'group' });
      group.append(details(n, sid));
      for (const k of kids) group.append(item(k.node, level + 1, start, false, sid, edited, k.round));
      li.append(group);
    }
    if (group) group.hidden = !on;
    li.setAttribute('aria-expanded', on ? 'true' : 'false');
    toggle.textContent = on ? '▾' : '▸';
  };
  toggle.addEventListener('click', (e) => { e.stopPropagation(); li._open(li.getAttribute('aria-expanded') !== 'true'); focusItem(li.closest('[role=tree]'), li, false); });
  row.addEventListener('dblclick', () => li._open(li.getAttribute('aria-expanded') !== 'true'));
  return li;
}

function details(n, sid) {
  const links = [];
  if (n.request) links.push(h('a', { href: messagePath(sid, n.request), class: 'msg-link' }, `request #${n.request}`));
  if (n.response) links.push(' ', h('a', { href: messagePath(sid, n.response), class: 'msg-link' }, `response #${n.response}`));
  return h('li', { class: 'details', role: 'none' },
    h('div', {}, links, n.id ? h('span', { class: 'muted' }, ' id ', clipped(n.id, 60)) : '',
      ' ', h('span', { class: 'muted' }, fmtTime(n.start))),
    n.summary ? h('div', { class: 'summary-full' }, clipped(n.summary, 2000)) : '',
    n.note ? h('div', { class: 'note' }, clipped(n.note, 2000)) : '',
    (n.findings || []).length ? h('ul', { class: 'findings' }, n.findings.map((f) => h('li', {}, chip(f.kind, 'finding'), ' ', clipped(f.message, 500)))) : '');
}

function visibleItems(tree) {
  const out = [];
  const walk = (ul) => {
    for (const li of ul.children) {
      if (li.getAttribute('role') !== 'treeitem') continue;
      out.push(li);
      if (li.getAttribute('aria-expanded') === 'true') {
        const g = li.querySelector(':scope > ul[role=group]');
        if (g) walk(g);
      }
    }
  };
  walk(tree);
  return out;
}

function focusItem(tree, li, scroll = true) {
  if (!tree || !li) return;
  for (const x of tree.querySelectorAll('li[tabindex="0"]')) x.tabIndex = -1;
  li.tabIndex = 0;
  li.focus({ preventScroll: !scroll });
}

function keyNav(e, tree, sid) {
  const li = e.target.closest('li[role=treeitem]');
  if (!li) return;
  const items = visibleItems(tree);
  const i = items.indexOf(li);
  const open = li.getAttribute('aria-expanded') === 'true';
  switch (e.key) {
    case 'ArrowDown': focusItem(tree, items[Math.min(items.length - 1, i + 1)]); break;
    case 'ArrowUp': focusItem(tree, items[Math.max(0, i - 1)]); break;
    case 'Home': focusItem(tree, items[0]); break;
    case 'End': focusItem(tree, items[items.length - 1]); break;
    case 'ArrowRight':
      if (!open) li._open(true);
      else {
        const child = li.querySelector(':scope > ul[role=group] > li[role=treeitem]');
        if (child) focusItem(tree, child);
      }
      break;
    case 'ArrowLeft':
      if (open) li._open(false);
      else {
        const parent = li.parentElement.closest('li[role=treeitem]');
        if (parent) focusItem(tree, parent);
      }
      break;
    case 'Enter': {
      const seq = li.dataset.seq;
      if (seq) navigate(messagePath(sid, seq));
      break;
    }
    case ' ': li._open(!open); break;
    default: return;
  }
  e.preventDefault();
}
