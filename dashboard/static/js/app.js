// The dashboard app: History API routing over deep links. Each page is a
// function that fills <main> and may return a cleanup function. The pages
// are listed once, in pages.json, which the server reads too (every page
// is a deep link it answers with index.html).

import PAGES from './pages.json' with { type: 'json' };
import { h, clear, add } from './dom.js';
import { api, info } from './api.js';
import { watchStatus } from './banner.js';
import { setRouter, navigate, status } from './nav.js';
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

let current = { cleanup: null, abort: null };

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
  for (const { re, page, nav } of routes) {
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

setRouter({ render, leave: null });

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
