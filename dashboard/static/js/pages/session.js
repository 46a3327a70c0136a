// /sessions/{id}: the session's facts and actions, and its causal tree:
// each call with what it set off (sampling, elicitation and roots requests,
// MRTR rounds, tool loops, notifications), labelled by what it holds
// ("2 rounds · 1 sampling · 3 progress"), expandable, with relative
// timings, status and finding chips; a sampling or elicitation node
// previews its messages, form and answer when opened. Keyboard: arrows
// move and open/close, Enter opens the message, Home/End jump; in the
// page, / filters, e and f go to the next error and finding (E and F back).

import { h, chip, clipped, cls, copyButton, dirArrow, fmtCount, fmtMs, fmtTime, inputPath, kv, messagePath, ms, nsToMs, section, via } from '../dom.js';
import { api, info, enc } from '../api.js';
import { navigate, status } from '../nav.js';
import { parse } from '../view.js';


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
      ['Via', via(s)],
      s.command
        ? ['Command', [h('code', {}, clipped((s.command.args || []).join(' '), 300)),
          s.command.dir ? h('span', { class: 'muted' }, ' in ', clipped(s.command.dir, 120)) : '',
          s.command.exit ? h('span', { class: 'muted' }, ` (${s.command.exit})`) : '']]
        : ['Upstream', h('code', {}, clipped((s.upstream || '') + (s.path || ''), 200))],
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
  const nRoots = tree.tree.roots.length;
  const found = tree.tree.findings || 0;
  const unanswered = tree.tree.unanswered || 0;
  const tools = treeTools(treeEl, tree.tree.roots);
  main.append(section(`Calls and notifications (${fmtCount(nRoots)})`,
    h('p', { class: 'muted small' }, 'Click ▸ or use the arrow keys to open a node; Enter opens its message. ',
      `${fmtCount(found)} finding${found === 1 ? '' : 's'} recorded`, unanswered ? `, and ${fmtCount(unanswered)} request${unanswered === 1 ? '' : 's'} never answered` : '', '. ',
      h('a', { href: '/latency?session=' + enc(s.id) }, 'Latency of this session')),
    tools.el,
    treeEl));
  treeEl.setAttribute('data-ready', '');
  // For the render benchmark: the tree is in the page, then on screen
  // (after the next frame is painted).
  performance.mark('mcptape:tree-ready');
  requestAnimationFrame(() => setTimeout(() => performance.mark('mcptape:tree-painted'), 0));
  return tools.cleanup;
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
    if (li && !e.target.closest('a, button, details, input, select, .preview')) focusItem(ul, li, false);
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

// kidsOf are a node's rounds, then its children.
function kidsOf(n) {
  return [...(n.rounds || []).map((r, i) => ({ node: r, round: i + 1 })), ...(n.children || []).map((c) => ({ node: c }))];
}

// CATEGORY names what a child is, for a node's label.
function category(n) {
  switch (n.method) {
    case 'sampling/createMessage': return 'sampling';
    case 'elicitation/create': return 'elicitation';
    case 'roots/list': return 'roots';
    case 'notifications/progress': return 'progress';
    case 'notifications/message': return 'log';
    case 'notifications/cancelled': return 'cancelled';
  }
  if (n.kind === 'notification') return 'notification';
  if (n.kind === 'call') return 'call';
  return n.method || n.kind;
}

const ORDER = ['round', 'sampling', 'elicitation', 'roots', 'call', 'progress', 'log', 'cancelled', 'notification'];

// kidsLabel says what a node holds, counting inside its rounds too:
// "2 rounds · 1 sampling · 1 elicitation · 3 progress".
export function kidsLabel(n) {
  if (!(n.rounds && n.rounds.length) && !(n.children && n.children.length)) return [];
  const counts = new Map();
  const bump = (k) => counts.set(k, (counts.get(k) || 0) + 1);
  for (const r of n.rounds || []) {
    bump('round');
    for (const c of r.children || []) bump(category(c));
  }
  for (const c of n.children || []) bump(category(c));
  const keys = [...counts.keys()].sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99));
  return keys.map((k) => {
    const v = counts.get(k);
    const word = k === 'round' || k === 'call' || k === 'notification' ? `${k}${v === 1 ? '' : 's'}` : k;
    return [k, `${fmtCount(v)} ${word}`];
  });
}

// facts are a node's errors and findings anywhere under it, counted
// once; its text for the filter is gathered only when a filter asks.
function facts(n) {
  if (n._facts) return n._facts;
  let errors = n.status === 'error' || n.status === 'isError' ? 1 : 0;
  let findings = 0;
  const fs = n.findings;
  if (fs) for (let i = 0; i < fs.length; i++) if (fs[i].kind !== 'redacted') findings++;
  for (const list of [n.rounds, n.children]) {
    if (!list) continue;
    for (let i = 0; i < list.length; i++) {
      const f = facts(list[i]);
      errors += f.errors;
      findings += f.findings;
    }
  }
  n._facts = { errors, findings };
  return n._facts;
}

function textOf(n) {
  if (n._text !== undefined) return n._text;
  const parts = [n.method || '', n.name || '', n.key || '', n.label || '', n.summary || '', n.status || '', n.note || ''];
  for (const list of [n.rounds, n.children]) if (list) for (const c of list) parts.push(textOf(c));
  n._text = parts.join('\n').toLowerCase();
  return n._text;
}

function item(n, level, parentStart, root, sid, edited, round) {
  const start = ms(n.start);
  const kids = kidsOf(n);
  const seq = n.request || n.response || 0;
  const href = n.kind === 'input-request' && n.in ? inputPath(sid, n.in, n.key || '') : seq ? messagePath(sid, seq) : '';
  const f = facts(n);
  const li = h('li', {
    role: 'treeitem', 'aria-level': String(level), 'aria-expanded': 'false', tabindex: '-1',
    class: 'node kind-' + cls(n.kind) + (n.dir === 's2c' ? ' s2c' : ''), 'data-method': n.method || '',
    'data-seq': String(seq || ''), 'data-href': href || undefined,
    'data-errors': f.errors ? String(f.errors) : undefined, 'data-findings': f.findings ? String(f.findings) : undefined,
  });
  li._node = n;
  const offset = start - parentStart;
  const toggle = h('span', { class: 'toggle', 'aria-hidden': 'true' }, '▸');
  const own = (n.findings || []).filter((x) => x.kind !== 'redacted');
  const inside = f.findings - own.length;
  const label = kidsLabel(n);
  const row = h('div', { class: 'row' },
    toggle,
    h('span', { class: 'dir', title: n.dir === 'c2s' ? 'client → server' : 'server → client' }, dirArrow(n.dir)),
    h('span', { class: 'title' }, title(n, round)),
    n.status ? chip(n.status, 'status-' + cls(n.status)) : '',
    n.duration ? h('span', { class: 'dur' }, fmtMs(nsToMs(n.duration))) : '',
    h('span', { class: 'offset', title: root ? 'since the session started' : 'since the parent started' }, '+' + fmtMs(Math.max(0, offset))),
    (edited[n.request] || edited[n.response]) ? chip('edited', 'edited') : '',
    own.slice(0, 4).map((x) => chip(x.kind, 'finding')),
    inside > 0 ? chip(`${inside} finding${inside === 1 ? '' : 's'} inside`, 'finding inside') : '',
    label.length ? h('span', { class: 'kids-label', title: 'what this call set off' }, label.map(([k, t], i) => [i ? ' · ' : '', h('span', { class: 'k-' + cls(k) }, t)])) : '',
    n.summary ? h('span', { class: 'summary' }, clipped(n.summary, 140)) : '');
  li.append(row);
  let group = null;
  li._open = (on) => {
    if (on && !group) {
      group = h('ul', { role: 'group' });
      group.append(details(n, sid, href));
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

function details(n, sid, href) {
  const links = [];
  if (n.kind === 'input-request' && href) {
    links.push(h('a', { href, class: 'msg-link input-link' }, `input request ${n.key || ''}`), ' ',
      h('span', { class: 'muted' }, 'in '), h('a', { href: messagePath(sid, n.in), class: 'msg-link' }, `#${n.in}`));
    if (n.answered) links.push(' ', h('span', { class: 'muted' }, 'answered in '), h('a', { href: messagePath(sid, n.answered), class: 'msg-link' }, `#${n.answered}`));
  }
  if (n.request) links.push(h('a', { href: messagePath(sid, n.request), class: 'msg-link' }, `request #${n.request}`));
  if (n.response) links.push(' ', h('a', { href: messagePath(sid, n.response), class: 'msg-link' }, `response #${n.response}`));
  const el = h('li', { class: 'details', role: 'none' },
    h('div', {}, links, n.id ? h('span', { class: 'muted' }, ' id ', clipped(n.id, 60)) : '',
      ' ', h('span', { class: 'muted' }, fmtTime(n.start))),
    n.summary ? h('div', { class: 'summary-full' }, clipped(n.summary, 2000)) : '',
    n.note ? h('div', { class: 'note' }, clipped(n.note, 2000)) : '',
    (n.findings || []).length ? h('ul', { class: 'findings' }, n.findings.map((f) => h('li', {}, chip(f.kind, 'finding'), ' ', clipped(f.message, 500)))) : '');
  if (n.method === 'sampling/createMessage' || n.method === 'elicitation/create') el.append(preview(n, sid));
  return el;
}

// preview shows a sampling node's messages and answer, or an elicitation
// node's message, form and answer, fetched when the node first opens.
function preview(n, sid) {
  const box = h('div', { class: 'preview', 'data-preview': n.method }, h('span', { class: 'muted small' }, 'loading…'));
  const show = async (params, answer) => {
    // The renderers load with the first preview: the tree does not wait for them.
    const [{ samplingRequest, samplingResult }, { elicitationRequest }] = await Promise.all([import('../render/sampling.js'), import('../render/elicitation.js')]);
    box.replaceChildren();
    if (n.method === 'sampling/createMessage') {
      box.append(samplingRequest(params, { compact: true }));
      if (answer && answer.result) box.append(h('h3', {}, 'Answer'), samplingResult(answer.result, { compact: true }));
      else if (answer && answer.error) box.append(h('p', { class: 'bad' }, 'Answered with an error: ', clipped(String(answer.error.message || ''), 300)));
      else box.append(h('p', { class: 'muted' }, 'No answer recorded.'));
    } else {
      box.append(elicitationRequest(params, { answer: answer && answer.result ? answer.result : undefined, compact: true }));
      if (!answer) box.append(h('p', { class: 'muted' }, 'No answer recorded.'));
    }
  };
  const fail = (e) => box.replaceChildren(h('p', { class: 'muted' }, 'No preview: ', e.message));
  if (n.kind === 'input-request' && n.in) {
    api('/messages/' + n.in + '/inputs/' + enc(n.key || '')).then((d) =>
      show(d.params, d.answer === undefined || d.answer === null ? null : { result: d.answer })).catch(fail);
  } else if (n.request) {
    api('/messages/' + n.request).then((d) => {
      const req = parse(d.raw || '').value || {};
      const ans = d.answer ? parse(d.answer).value : null;
      return show(req.params, ans);
    }).catch(fail);
  } else {
    box.replaceChildren(h('p', { class: 'muted' }, 'Nothing to preview.'));
  }
  return box;
}

// treeTools is the filter box and the next-error / next-finding buttons,
// with their keys (/, e, f; E and F go back).
function treeTools(tree, roots) {
  const input = h('input', { type: 'search', class: 'tree-filter', placeholder: 'Filter: method, tool or text (press /)', 'aria-label': 'filter the calls', autocomplete: 'off' });
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
  const nextError = h('button', { type: 'button', class: 'next-error', title: 'next error (e; E goes back)', onclick: () => jump('data-errors', 1) }, 'Next error');
  const nextFinding = h('button', { type: 'button', class: 'next-finding', title: 'next finding (f; F goes back)', onclick: () => jump('data-findings', 1) }, 'Next finding');
  let timer;
  const apply = () => {
    const q = input.value.trim().toLowerCase();
    let shown = 0;
    for (const li of tree.children) {
      if (li.getAttribute('role') !== 'treeitem') continue;
      const ok = !q || textOf(li._node).includes(q);
      li.classList.toggle('filtered-out', !ok);
      if (ok) shown++;
    }
    count.textContent = q ? `${fmtCount(shown)} of ${fmtCount(roots.length)} shown` : '';
  };
  input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(apply, 80); });
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
      default: return;
    }
    e.preventDefault();
  };
  document.addEventListener('keydown', onKey);
  return {
    el: h('div', { class: 'tree-tools' }, input, nextError, nextFinding, count),
    cleanup: () => { document.removeEventListener('keydown', onKey); clearTimeout(timer); },
  };
}

function visibleItems(tree) {
  const out = [];
  const walk = (ul) => {
    for (const li of ul.children) {
      if (li.getAttribute('role') !== 'treeitem' || li.classList.contains('filtered-out')) continue;
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
  if (e.target.closest('a, button, input, select, textarea, summary')) return;
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
      // Messages open; so do the requests inside 2026-07-28 rounds.
      const href = li.dataset.href;
      if (href) navigate(href);
      break;
    }
    case ' ': li._open(!open); break;
    default: return;
  }
  e.preventDefault();
}
