// The dashboard app: History API routing over deep links. Each page is a
// function that fills <main> and may return a cleanup function. The pages
// are listed once, in pages.json, which the server reads too (every page
// is a deep link it answers with index.html).

import PAGES from './pages.json' with { type: 'json' };
import { h, clear, add } from './dom.js';
import { api, info, STOPPED } from './api.js';
import { watchStatus } from './banner.js';
import { setRouter, navigate, status, setKeys, pageKeys } from './nav.js';
import { onTail } from './tail.js';

// pattern turns a page's path ("/sessions/{id}/messages/{seq:[0-9]+}")
// into a regular expression that captures its parameters.
function pattern(path) {
  const parts = path.split('/').map((seg) => {
    const m = /^\{[a-z]+(?::(.+))?\}$/.exec(seg);
    if (m) return `(${m[1] || '[^/]+'})`;
    return seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  });
  return new RegExp(`^${parts.join('/')}$`);
}

// Each page's module loads the first time it is visited, so a page does
// not wait for the code of the others.
const routes = PAGES.map((p) => ({
  re: pattern(p.path),
  nav: p.nav || '',
  page: p.redirect
    ? () => { navigate(p.redirect, { replace: true }); }
    : async (ctx) => (await import(p.module))[p.page](ctx),
}));

let current = { cleanup: null, abort: null, keep: null, ready: false };
// shown is the address of the page on screen: a move within it (the skip
// link's #main) draws nothing anew.
let shown = '';

// Keeping one's place. What a page shows — where it is scrolled to, which
// folds are open, what has the focus, and what the page itself keeps (the
// tree's open nodes) — is saved in its history entry as the user goes
// (scrolling, clicking, keys) and when a link leaves it; Back and Forward
// render the page again and put it all back.
history.scrollRestoration = 'manual';

// focusPath names the focused element so that it can be found again in the
// same page drawn anew: by the nearest data-key, else by child positions
// under <main>.
function focusPath(main) {
  const el = document.activeElement;
  if (!el || el === document.body || !main.contains(el)) return null;
  const keyed = el.closest('[data-key]');
  if (keyed && main.contains(keyed)) return { key: keyed.dataset.key, self: keyed === el };
  const path = [];
  for (let n = el; n && n !== main; n = n.parentElement) path.unshift([...n.parentElement.children].indexOf(n));
  return { path };
}

function findFocus(main, f) {
  if (!f) return null;
  if (f.key !== undefined) {
    const el = main.querySelector(`[data-key="${CSS.escape(f.key)}"]`);
    return el && !f.self ? el.querySelector('a, button, input, select, textarea, [tabindex]') || el : el;
  }
  let n = main;
  for (const i of f.path || []) {
    n = n && n.children[i];
  }
  return n || null;
}

function snapshot() {
  const main = document.getElementById('main');
  const open = [];
  main.querySelectorAll('details').forEach((d, i) => { if (d.open) open.push(i); });
  let page;
  try { page = current.keep ? current.keep() : undefined; } catch { page = undefined; }
  return { scroll: window.scrollY, open, focus: focusPath(main), page };
}

function save() {
  if (!current.ready) return;
  history.replaceState({ ...(history.state || {}), view: snapshot() }, '');
}

let saveTimer = 0;
function saveSoon() {
  clearTimeout(saveTimer);
  saveTimer = setTimeout(save, 150);
}
for (const ev of ['scroll', 'click', 'keyup', 'focusin', 'toggle']) window.addEventListener(ev, saveSoon, { passive: true, capture: true });

// restore puts back what snapshot saved, once the page has rendered.
function restore(main, view) {
  const details = main.querySelectorAll('details');
  for (const i of view.open || []) if (details[i]) details[i].open = true;
  const el = findFocus(main, view.focus);
  if (el && typeof el.focus === 'function') el.focus({ preventScroll: true });
  const to = view.scroll || 0;
  window.scrollTo(0, to);
  // Folds opened above fill in as they load: scroll again once they have.
  requestAnimationFrame(() => requestAnimationFrame(() => { if (Math.abs(window.scrollY - to) > 1) window.scrollTo(0, to); }));
}

async function render(notice) {
  if (current.cleanup) {
    try { current.cleanup(); } catch { /* a page's cleanup must not stop the next */ }
  }
  if (current.abort) current.abort.abort();
  clearTimeout(saveTimer);
  const abort = new AbortController();
  current = { cleanup: null, abort, keep: null, ready: false };
  setKeys([]);
  const mine = current;
  shown = location.pathname + location.search;
  const view = history.state && history.state.view;
  const main = document.getElementById('main');
  clear(main);
  status(notice && typeof notice[0] === 'string' ? notice[0] : '', notice ? notice[1] || '' : '');
  const path = location.pathname;
  for (const { re, page, nav } of routes) {
    const m = re.exec(path);
    if (!m) continue;
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.nav === nav);
    }
    const params = m.slice(1).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
    // saved is what the page kept last time (ctx.keep's), keep registers
    // what to keep this time.
    const ctx = { params, query: new URLSearchParams(location.search), main, signal: abort.signal, navigate,
      saved: view ? view.page : undefined, keep: (fn) => { mine.keep = fn; } };
    try {
      const cleanup = await page(ctx);
      if (abort.signal.aborted) {
        if (typeof cleanup === 'function') cleanup();
      } else {
        current.cleanup = typeof cleanup === 'function' ? cleanup : null;
        if (view) restore(main, view);
        else window.scrollTo(0, 0);
        current.ready = true;
      }
    } catch (e) {
      if (abort.signal.aborted || e.name === 'AbortError') return;
      clear(main);
      // A page's code that does not load, or an API that does not answer:
      // the process behind the page has stopped.
      const stopped = e.code === 'stopped' || (e instanceof TypeError && /dynamically imported module|Failed to fetch|Importing a module script failed/.test(e.message));
      main.append(h('div', { class: 'error', role: 'alert' },
        h('h1', {}, stopped ? 'mcptape has stopped' : e.status === 404 ? 'Not found' : 'Something went wrong'),
        h('p', {}, stopped ? STOPPED : e.message)));
    }
    return;
  }
  main.append(h('h1', {}, 'Not found'), h('p', {}, 'No page at this address. ', h('a', { href: '/sessions' }, 'Sessions')));
}

setRouter({ render, leave: save });

// Links to this site navigate within the app.
document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || a.hasAttribute('download') || a.target) return;
  const href = a.getAttribute('href');
  if (!href.startsWith('/') || href.startsWith('//') || href.startsWith('/api/') || href.startsWith('/metrics')) return;
  e.preventDefault();
  navigate(href);
});

window.addEventListener('popstate', () => {
  if (location.pathname + location.search === shown) return;
  render();
});

// ? shows the keys: the app's and the page's.
const APP_KEYS = [['?', 'this help'], ['Tab', 'the first Tab stop is “Skip to content”'], ['Esc', 'close this help']];

function showHelp() {
  let dlg = document.getElementById('keys-help');
  if (!dlg) {
    dlg = h('dialog', { id: 'keys-help', class: 'keys-help', 'aria-labelledby': 'keys-help-title' });
    document.body.append(dlg);
  }
  const rows = (list) => list.map(([k, what]) => h('tr', {}, h('th', { scope: 'row' }, h('kbd', {}, k)), h('td', {}, what)));
  const page = pageKeys();
  dlg.replaceChildren(h('h2', { id: 'keys-help-title' }, 'Keys'),
    ...(page.length ? [h('h3', {}, 'On this page'), h('table', { class: 'keys' }, h('tbody', {}, rows(page)))] : [h('p', { class: 'muted' }, 'This page has no keys of its own.')]),
    h('h3', {}, 'Everywhere'), h('table', { class: 'keys' }, h('tbody', {}, rows(APP_KEYS))),
    h('form', { method: 'dialog' }, h('button', { type: 'submit', class: 'primary' }, 'Close')));
  if (!dlg.open) dlg.showModal();
}

document.addEventListener('keydown', (e) => {
  if (e.key !== '?' || e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
  e.preventDefault();
  showHelp();
});

async function boot() {
  // The page renders at once; the header and footer follow what the
  // server says it can do.
  render();
  watchStatus();
  try {
    const i = await info();
    for (const a of document.querySelectorAll('#nav a[data-feature]')) a.hidden = !i.features[a.dataset.feature];
    const footer = document.getElementById('footer');
    clear(footer);
    add(footer, [`mcptape ${i.version}`, i.dataDir ? ` · ${i.dataDir}` : '', ` · live tail: ${i.live}`,
      i.features.metrics ? [' · ', h('a', { href: '/metrics' }, 'metrics')] : '']);
    if (i.features.pending) watchCount('pending', 'pending-count', '/pending', (r) => r.requests.length);
    if (i.features.intercept) watchCount('intercept', 'intercept-count', '/intercept', (r) => r.held.length);
  } catch (e) {
    status(e.message, 'bad');
  }
}

// watchCount keeps a nav badge (requests waiting for a person, messages
// held) from the live tail's events of type; pages subscribe to the same
// events themselves.
function watchCount(type, badgeID, path, count) {
  const badge = document.getElementById(badgeID);
  const show = (n) => {
    badge.textContent = String(n);
    badge.hidden = !n;
  };
  api(path).then((r) => show(count(r))).catch(() => {});
  onTail('state', (st) => { if (st === 'live') badge.dataset.live = '1'; });
  onTail(type, (d) => show(Number(d.count) || 0));
}

boot();
