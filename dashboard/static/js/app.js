// The dashboard app: History API routing over deep links. Each page is a
// function that fills <main> and may return a cleanup function.

import { h, clear, add } from './dom.js';
import { api, info } from './api.js';
import { watchStatus } from './banner.js';

// Each page's module loads the first time it is visited, so a page does
// not wait for the code of the others.
const lazy = (path, name) => async (ctx) => (await import(path))[name](ctx);

const routes = [
  [/^\/$/, () => { navigate('/sessions', { replace: true }); }, ''],
  [/^\/sessions$/, lazy('./pages/sessions.js', 'sessionsPage'), 'sessions'],
  [/^\/sessions\/([^/]+)$/, lazy('./pages/session.js', 'sessionPage'), 'sessions'],
  [/^\/sessions\/([^/]+)\/messages\/(\d+)$/, lazy('./pages/message.js', 'messagePage'), 'sessions'],
  [/^\/sessions\/([^/]+)\/messages\/(\d+)\/inputs\/([^/]+)$/, lazy('./pages/input.js', 'inputPage'), 'sessions'],
  [/^\/sessions\/([^/]+)\/exchanges\/(\d+)$/, lazy('./pages/exchange.js', 'exchangePage'), 'sessions'],
  [/^\/live$/, lazy('./pages/live.js', 'livePage'), 'live'],
  [/^\/latency$/, lazy('./pages/latency.js', 'latencyPage'), 'latency'],
  [/^\/profiles$/, lazy('./pages/profiles.js', 'profilesPage'), 'profiles'],
  [/^\/profiles\/([^/]+)$/, lazy('./pages/profiles.js', 'profilePage'), 'profiles'],
  [/^\/import$/, lazy('./pages/import.js', 'importPage'), 'import'],
  [/^\/pending$/, lazy('./pages/pending.js', 'pendingPage'), 'pending'],
  [/^\/intercept$/, lazy('./pages/intercept.js', 'interceptPage'), 'intercept'],
  [/^\/send$/, lazy('./pages/send.js', 'sendPage'), 'tools'],
  [/^\/tools$/, lazy('./pages/tools.js', 'toolsPage'), 'tools'],
];

let current = { cleanup: null, abort: null };

// navigate goes to url; notice is a [text, kind] status to show once the
// page has rendered (render clears the status line first).
export function navigate(url, { replace = false, notice = null } = {}) {
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render(notice);
}

// status shows a short message in the header.
export function status(text, kind = '') {
  const el = document.getElementById('status');
  el.textContent = text;
  el.className = 'status ' + kind;
}

async function render(notice) {
  if (current.cleanup) {
    try { current.cleanup(); } catch { /* a page's cleanup must not stop the next */ }
  }
  if (current.abort) current.abort.abort();
  const abort = new AbortController();
  current = { cleanup: null, abort };
  const main = document.getElementById('main');
  clear(main);
  status(notice && typeof notice[0] === 'string' ? notice[0] : '', notice ? notice[1] || '' : '');
  const path = location.pathname;
  for (const [re, page, nav] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.nav === nav);
    }
    const params = m.slice(1).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
    const ctx = { params, query: new URLSearchParams(location.search), main, signal: abort.signal, navigate };
    try {
      const cleanup = await page(ctx);
      if (abort.signal.aborted) {
        if (typeof cleanup === 'function') cleanup();
      } else {
        current.cleanup = typeof cleanup === 'function' ? cleanup : null;
      }
    } catch (e) {
      if (abort.signal.aborted || e.name === 'AbortError') return;
      clear(main);
      main.append(h('div', { class: 'error', role: 'alert' }, h('h1', {}, e.status === 404 ? 'Not found' : 'Something went wrong'), h('p', {}, e.message)));
    }
    return;
  }
  main.append(h('h1', {}, 'Not found'), h('p', {}, 'No page at this address. ', h('a', { href: '/sessions' }, 'Sessions')));
}

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

window.addEventListener('popstate', () => render());

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
    if (i.features.pending) watchPending();
    if (i.features.intercept) watchIntercept();
  } catch (e) {
    status(e.message, 'bad');
  }
}

// watchPending keeps the nav's count of requests waiting for a person
// (a replay client's dashboard) from the live tail's pending events, and
// passes them on to pages as 'mcptape:pending' events on window.
function watchPending() {
  const badge = document.getElementById('pending-count');
  const show = (n) => {
    badge.textContent = String(n);
    badge.hidden = !n;
  };
  api('/pending').then((r) => show(r.requests.length)).catch(() => {});
  const es = new EventSource('/api/v1/live');
  es.addEventListener('open', () => { badge.dataset.live = '1'; });
  es.addEventListener('pending', (ev) => {
    let d;
    try { d = JSON.parse(ev.data); } catch { return; }
    show(Number(d.count) || 0);
    window.dispatchEvent(new CustomEvent('mcptape:pending', { detail: d }));
  });
}

// watchIntercept keeps the nav's count of held messages from the live
// tail's intercept events, and passes them on to pages as
// 'mcptape:intercept' events on window.
function watchIntercept() {
  const badge = document.getElementById('intercept-count');
  const show = (n) => {
    badge.textContent = String(n);
    badge.hidden = !n;
  };
  api('/intercept').then((r) => show(r.held.length)).catch(() => {});
  const es = new EventSource('/api/v1/live');
  es.addEventListener('open', () => { badge.dataset.live = '1'; });
  es.addEventListener('intercept', (ev) => {
    let d;
    try { d = JSON.parse(ev.data); } catch { return; }
    show(Number(d.count) || 0);
    window.dispatchEvent(new CustomEvent('mcptape:intercept', { detail: d }));
  });
}

boot();
