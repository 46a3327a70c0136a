// A session's causal tree: each call with what it set off (sampling,
// elicitation and roots requests, MRTR rounds, tool loops, notifications),
// labelled by what it holds ("2 rounds · 1 sampling · 3 progress"),
// expandable, with relative timings, who was waited on (a message held on
// the Intercept page, a person or the client answering, progress n/m),
// status and finding chips; a sampling or elicitation node previews its
// messages, form and answer when opened. A node's details and children
// are built when it first opens, so that a session of thousands of calls
// renders quickly. Every node has a data-key that names it across redraws
// (live updates, Back), by its messages' seqs.

import { h, chip, clipped, cls, dirArrow, fmtCount, fmtMs, fmtTime, inputPath, messagePath, ms, nsToMs } from '../dom.js';
import { api, enc } from '../api.js';
import { navigate } from '../nav.js';
import { parse } from '../view.js';

// keyOf names a node: its request's (or lone message's) seq, and for an
// MRTR round or an input request what sets it apart from its call.
export function keyOf(n, round) {
  if (n.kind === 'input-request') return `i${n.in || 0}:${n.key || ''}`;
  const seq = n.request || n.response;
  if (round) return `r${seq || round}`;
  return seq ? `n${seq}` : `t${n.kind}:${n.start}`;
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
export function kidsOf(n) {
  return [...(n.rounds || []).map((r, i) => ({ node: r, round: i + 1 })), ...(n.children || []).map((c) => ({ node: c }))];
}

// category names what a child is, for a node's label.
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
// once, and whether a server request (sampling, elicitation, roots) is
// nested in it.
function facts(n) {
  if (n._facts) return n._facts;
  let errors = n.status === 'error' || n.status === 'isError' ? 1 : 0;
  let findings = 0;
  let nested = false;
  const fs = n.findings;
  if (fs) for (let i = 0; i < fs.length; i++) if (fs[i].kind !== 'redacted') findings++;
  for (const list of [n.rounds, n.children]) {
    if (!list) continue;
    for (let i = 0; i < list.length; i++) {
      const c = list[i];
      const f = facts(c);
      errors += f.errors;
      findings += f.findings;
      nested = nested || f.nested || c.kind === 'server-request' || c.kind === 'input-request';
    }
  }
  n._facts = { errors, findings, nested };
  return n._facts;
}

// textOf is what the filter matches without asking the server: the
// node's method, name, key, label, summary, status and note, and its
// children's.
function textOf(n) {
  if (n._text !== undefined) return n._text;
  const parts = [n.method || '', n.name || '', n.key || '', n.label || '', n.summary || '', n.status || '', n.note || ''];
  for (const list of [n.rounds, n.children]) if (list) for (const c of list) parts.push(textOf(c));
  n._text = parts.join('\n').toLowerCase();
  return n._text;
}

// seqsOf are the seqs of a node's messages and of everything under it.
function seqsOf(n, out = []) {
  if (n.request) out.push(n.request);
  if (n.response) out.push(n.response);
  if (n.in) out.push(n.in);
  for (const list of [n.rounds, n.children]) if (list) for (const c of list) seqsOf(c, out);
  return out;
}

// sig changes when anything a node's row or children show changes: a live
// update redraws only the roots whose sig changed.
function sig(n) {
  let s = `${n.status || ''}|${n.response || 0}|${n.duration || 0}|${(n.findings || []).length}|${n.summary || ''}|${n.note || ''}`;
  for (const list of [n.rounds, n.children]) if (list) for (const c of list) s += `(${sig(c)})`;
  return s;
}

// HELD reads what the recorder noted of a held message: "held 19.2s by
// the intercept rule …, then answered by a person …".
const HELD = /^held (\S+) by (.*?)(?:, then (.*))?$/;

// waits are chips that say whom the node waited on: a message held on
// the Intercept page (and who let it go), the client (or a person in it)
// answering a server's request, the progress a pending call reported.
function waits(n) {
  const out = [];
  for (const f of n.findings || []) {
    if (f.kind !== 'intercepted') continue;
    const m = HELD.exec(f.message || '');
    if (!m) continue;
    const how = m[3] || '';
    const person = /by (a person|the dashboard)/.test(how) || /person/.test(m[2]);
    out.push(chip(`held ${m[1]} by intercept${person ? ', a person decided' : ''}`, 'wait held'));
    out[out.length - 1].title = f.message;
  }
  if (n.kind === 'server-request' && n.duration && nsToMs(n.duration) >= 1000) {
    const who = n.method === 'elicitation/create' ? 'waiting for a person (the client asked its user)' :
      n.method === 'sampling/createMessage' ? 'waiting for the client (its model, or a person approving)' : 'waiting for the client';
    const c = chip(`${fmtMs(nsToMs(n.duration))} ${who.split(' (')[0]}`, 'wait client');
    c.title = who;
    out.push(c);
  }
  if (n.status === 'pending') {
    const progress = [...(n.children || [])].reverse().find((c) => c.method === 'notifications/progress' && c.summary);
    if (progress) out.push(chip(`progress ${progress.summary.split(' ')[0]}`, 'wait progress'));
  }
  return out;
}

// SETTING is the localStorage key of "open calls with nested server
// requests".
export const OPEN_NESTED = 'mcptape.openNested';

function openNestedSetting() {
  try { return localStorage.getItem(OPEN_NESTED) === '1'; } catch { return false; }
}

// previews load when they come into view: Expand all does not ask the
// server for every sampling request at once.
const previewSeen = typeof IntersectionObserver === 'function' ? new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (!e.isIntersecting) continue;
    previewSeen.unobserve(e.target);
    if (e.target._load) e.target._load();
  }
}, { rootMargin: '200px' }) : null;

// buildTree draws a tree answer (GET /api/v1/sessions/{id}/tree) of
// session s. It returns the tree's element and what the page does with
// it: update (a newer answer, drawn without moving what is on screen),
// expandAll, collapseAll, filter, reveal, and keep/restore (the open
// nodes, for Back).
export function buildTree(answer, s) {
  const sid = s.id;
  let t0 = ms(s.start);
  let edited = answer.edited || {};
  const ul = h('ul', { class: 'tree', role: 'tree', 'aria-label': 'calls of the session' });
  const byKey = new Map(); // root key → {li, node, sig}
  const empty = h('li', { class: 'muted' }, 'No messages.');

  const item = (n, level, parentStart, root, round) => {
    const start = ms(n.start);
    const kids = kidsOf(n);
    const seq = n.request || n.response || 0;
    const href = n.kind === 'input-request' && n.in ? inputPath(sid, n.in, n.key || '') : seq ? messagePath(sid, seq) : '';
    const f = facts(n);
    const li = h('li', {
      role: 'treeitem', 'aria-level': String(level), 'aria-expanded': 'false', tabindex: '-1',
      class: 'node kind-' + cls(n.kind) + (n.dir === 's2c' ? ' s2c' : ''), 'data-method': n.method || '',
      'data-seq': String(seq || ''), 'data-href': href || undefined, 'data-key': keyOf(n, round),
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
      n.duration ? h('span', { class: 'dur', title: 'from the request to its answer' }, fmtMs(nsToMs(n.duration))) : '',
      h('span', { class: 'offset', title: root ? 'since the session started' : 'since the parent started' }, '+' + fmtMs(Math.max(0, offset))),
      waits(n),
      (edited[n.request] || edited[n.response]) ? chip('edited', 'edited') : '',
      own.filter((x) => x.kind !== 'intercepted' || !HELD.test(x.message || '')).slice(0, 4).map((x) => chip(x.kind, 'finding')),
      inside > 0 ? chip(`${inside} finding${inside === 1 ? '' : 's'} inside`, 'finding inside') : '',
      label.length ? h('span', { class: 'kids-label', title: 'what this call set off' }, label.map(([k, t], i) => [i ? ' · ' : '', h('span', { class: 'k-' + cls(k) }, t)])) : '',
      n.summary ? h('span', { class: 'summary' }, clipped(n.summary, 140)) : '');
    li.append(row);
    let group = null;
    li._open = (on) => {
      if (on && !group) {
        group = h('ul', { role: 'group' });
        group.append(details(n, sid, href));
        for (const k of kids) group.append(item(k.node, level + 1, start, false, k.round));
        li.append(group);
      }
      if (group) group.hidden = !on;
      li.setAttribute('aria-expanded', on ? 'true' : 'false');
      toggle.textContent = on ? '▾' : '▸';
    };
    toggle.addEventListener('click', (e) => { e.stopPropagation(); li._open(li.getAttribute('aria-expanded') !== 'true'); focusItem(ul, li, false); });
    row.addEventListener('dblclick', () => li._open(li.getAttribute('aria-expanded') !== 'true'));
    return li;
  };

  const rootItem = (n) => {
    const li = item(n, 1, t0, true);
    if (openNested && facts(n).nested) li._open(true);
    return li;
  };

  let openNested = openNestedSetting();
  let roots = answer.tree.roots;
  const frag = document.createDocumentFragment();
  for (const n of roots) {
    const li = rootItem(n);
    byKey.set(li.dataset.key, { li, node: n, sig: sig(n) });
    frag.append(li);
  }
  ul.append(frag);
  if (roots.length === 0) ul.append(empty);
  const first = ul.querySelector('li[role=treeitem]');
  if (first) first.tabIndex = 0;
  ul.addEventListener('keydown', (e) => keyNav(e, ul));
  ul.addEventListener('click', (e) => {
    const li = e.target.closest('li[role=treeitem]');
    if (li && !e.target.closest('a, button, details, input, select, .preview')) focusItem(ul, li, false);
  });

  // openKeys are the keys of the open nodes, parents first.
  const openKeys = () => [...ul.querySelectorAll('li[role=treeitem][aria-expanded=true]')].map((li) => li.dataset.key);
  const find = (key) => ul.querySelector(`li[data-key="${CSS.escape(key)}"]`);
  const reopen = (keys) => {
    for (const k of keys) {
      const li = find(k);
      if (li && li.getAttribute('aria-expanded') !== 'true') li._open(true);
    }
  };

  const ctl = {
    el: ul,
    get roots() { return roots; },
    // update draws a newer answer: new calls are added at the end, calls
    // that changed (answered, more children) are redrawn where they are,
    // open as they were; the focus stays where it was.
    update(next, session) {
      if (session) t0 = ms(session.start);
      edited = next.edited || {};
      const focus = document.activeElement && ul.contains(document.activeElement) ? document.activeElement.closest('li[data-key]') : null;
      const focusKey = focus ? focus.dataset.key : null;
      const seen = new Set();
      let prev = null;
      for (const n of next.tree.roots) {
        const key = keyOf(n);
        seen.add(key);
        const had = byKey.get(key);
        const s2 = sig(n);
        if (had && had.sig === s2) {
          prev = had.li;
          continue;
        }
        const li = rootItem(n);
        if (had) {
          const open = [...had.li.querySelectorAll('li[aria-expanded=true]')].map((x) => x.dataset.key);
          const wasOpen = had.li.getAttribute('aria-expanded') === 'true';
          li.className = had.li.className;
          had.li.replaceWith(li);
          if (wasOpen) li._open(true);
          reopen(open);
        } else if (prev) {
          prev.after(li);
        } else {
          ul.prepend(li);
        }
        byKey.set(key, { li, node: n, sig: s2 });
        prev = li;
      }
      for (const [key, r] of byKey) {
        if (!seen.has(key)) {
          r.li.remove();
          byKey.delete(key);
        }
      }
      roots = next.tree.roots;
      empty.remove();
      if (roots.length === 0) ul.append(empty);
      if (!ul.querySelector('li[tabindex="0"]')) {
        const f = ul.querySelector('li[role=treeitem]');
        if (f) f.tabIndex = 0;
      }
      if (focusKey && !ul.contains(document.activeElement)) {
        const li = find(focusKey);
        if (li) focusItem(ul, li, false);
      }
    },
    // expandAll opens every node shown that holds others, level by
    // level (each opening adds the next level's nodes).
    expandAll() {
      for (let more = true; more;) {
        more = false;
        for (const li of visibleItems(ul)) {
          if (li.getAttribute('aria-expanded') === 'true' || !li._node || !kidsOf(li._node).length) continue;
          li._open(true);
          more = true;
        }
      }
    },
    collapseAll() {
      for (const li of ul.querySelectorAll('li[role=treeitem][aria-expanded=true]')) li._open(false);
    },
    setOpenNested(on) {
      openNested = on;
      if (on) for (const { li, node } of byKey.values()) if (facts(node).nested) li._open(true);
    },
    // filter shows the roots for which keep(node) holds.
    filter(keepRoot) {
      let shown = 0;
      for (const { li, node } of byKey.values()) {
        const ok = keepRoot(node);
        li.classList.toggle('filtered-out', !ok);
        if (ok) shown++;
      }
      return shown;
    },
    // reveal opens the nodes down to the first one holding a seq in
    // seqs, among the roots shown, and focuses it.
    reveal(seqs) {
      for (const li of ul.children) {
        if (li.getAttribute('role') !== 'treeitem' || li.classList.contains('filtered-out')) continue;
        const path = pathTo(li._node, seqs);
        if (!path) continue;
        let at = li;
        for (const [n, round] of path.slice(1)) {
          at._open(true);
          const next = at.querySelector(`:scope > ul[role=group] > li[data-key="${CSS.escape(keyOf(n, round))}"]`);
          if (!next) break;
          at = next;
        }
        focusItem(ul, at);
        at.scrollIntoView({ block: 'center' });
        at.classList.add('hit');
        return at;
      }
      return null;
    },
    keep() {
      return { open: openKeys() };
    },
    restore(saved) {
      if (saved && Array.isArray(saved.open)) reopen(saved.open);
    },
  };
  return ctl;
}

// pathTo is the path from n down to the first node that holds one of
// seqs as its own message: [[node, round], …], or null.
function pathTo(n, seqs, round) {
  if (seqs.has(n.request) || seqs.has(n.response) || (n.kind === 'input-request' && seqs.has(n.in))) return [[n, round]];
  for (const k of kidsOf(n)) {
    const p = pathTo(k.node, seqs, k.round);
    if (p) return [[n, round], ...p];
  }
  return null;
}

// matchesRoot says whether a root holds the filter's text (q, lower
// case) in what the tree shows, or one of its messages is in seqs (the
// server's search of their content).
export function matchesRoot(n, q, seqs) {
  if (!q) return true;
  if (textOf(n).includes(q)) return true;
  if (seqs && seqs.size) for (const s of seqsOf(n)) if (seqs.has(s)) return true;
  return false;
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
  if (n.method === 'sampling/createMessage' || n.method === 'elicitation/create') el.append(preview(n));
  return el;
}

// preview shows a sampling node's messages and answer, or an elicitation
// node's message, form and answer, fetched when it first comes into view.
function preview(n) {
  const box = h('div', { class: 'preview', 'data-preview': n.method }, h('span', { class: 'muted small' }, 'loading…'));
  const show = async (params, answer) => {
    // The renderers load with the first preview: the tree does not wait for them.
    const [{ samplingRequest, samplingResult }, { elicitationRequest }] = await Promise.all([import('./sampling.js'), import('./elicitation.js')]);
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
  box._load = () => {
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
  };
  if (previewSeen) previewSeen.observe(box);
  else box._load();
  return box;
}

export function visibleItems(tree) {
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

export function focusItem(tree, li, scroll = true) {
  if (!tree || !li) return;
  for (const x of tree.querySelectorAll('li[tabindex="0"]')) x.tabIndex = -1;
  li.tabIndex = 0;
  li.focus({ preventScroll: !scroll });
}

function keyNav(e, tree) {
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
