// DOM helpers. Recorded content is hostile: everything here puts text into
// the page as text nodes (textContent), never as markup, and never makes
// recorded text a link target. Nothing in the dashboard parses strings as HTML.

// h builds an element. props sets attributes (event handlers must be
// functions; href must be a path on this site; src must come from
// mediaURL); children are nodes or text.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  add(el, children);
  return el;
}

// s builds an SVG element, with the same rules.
export function s(tag, props, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setProps(el, props);
  add(el, children);
  return el;
}

function setProps(el, props) {
  if (!props) return;
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) {
      if (typeof v !== 'function') throw new Error('event handler must be a function');
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.setAttribute('class', v);
    } else if (k === 'value') {
      el.value = v;
    } else if (k === 'checked' || k === 'selected' || k === 'hidden' || k === 'disabled' || k === 'open') {
      el[k] = !!v;
    } else if (k === 'href') {
      if (!isLocalPath(v)) throw new Error('links go to this site only');
      el.setAttribute('href', v);
    } else if (k === 'src') {
      if (!v.startsWith('data:') && !isLocalPath(v)) throw new Error('src must be a checked data: URL');
      el.setAttribute('src', v);
    } else if (k === 'style' || k === 'srcdoc' || k === 'action' || k === 'formaction') {
      throw new Error(k + ' is not allowed');
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

// isLocalPath reports whether v is a path on this site ("/x", not "//x").
export function isLocalPath(v) {
  return typeof v === 'string' && v.startsWith('/') && !v.startsWith('//') && !v.startsWith('/\\');
}

// add appends children: nodes as they are, anything else as text.
export function add(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// clipped shows at most max characters of text, with a button that shows
// the rest (still as text).
export function clipped(text, max = 2000, tag = 'span') {
  text = String(text);
  const el = h(tag, { class: 'text' });
  if (text.length <= max) {
    el.textContent = text;
    return el;
  }
  const shown = h('span', {}, text.slice(0, max));
  const more = h('button', {
    type: 'button', class: 'link more',
    onclick: () => { shown.textContent = text; more.remove(); },
  }, `… show all (${fmtCount(text.length)} characters)`);
  add(el, [shown, ' ', more]);
  return el;
}

export function fmtCount(n) {
  return Number(n).toLocaleString('en-US');
}

export function fmtBytes(n) {
  if (n >= 10 << 20) return `${Math.round(n / (1 << 20))} MB`;
  if (n >= 10 << 10) return `${Math.round(n / 1024)} kB`;
  return `${n} B`;
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null) return '';
  if (ms < 1) return `${Math.round(ms * 1000)}µs`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)}ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)}s`;
  const m = Math.floor(ms / 60000);
  return `${m}m${Math.round((ms % 60000) / 1000)}s`;
}

// Durations in Go's JSON are nanoseconds.
export function nsToMs(ns) { return ns / 1e6; }

export function fmtTime(t) {
  if (!t || t.startsWith('0001-')) return '—';
  const d = new Date(t);
  if (isNaN(d)) return String(t);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function fmtClock(t) {
  const d = new Date(t);
  if (isNaN(d)) return '';
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function ms(t) {
  const d = Date.parse(t);
  return isNaN(d) ? 0 : d;
}

// cls keeps a value usable in a class name.
export function cls(v) {
  return String(v || '').toLowerCase().replace(/[^a-z0-9_-]/g, '');
}

export function chip(text, kind = '') {
  return h('span', { class: 'chip ' + kind }, text);
}

export function dirArrow(dir) {
  return dir === 'c2s' ? '→' : dir === 's2c' ? '←' : '·';
}

// sessionPath and messagePath are the app's deep links.
export function sessionPath(id) { return '/sessions/' + encodeURIComponent(id); }
export function messagePath(id, seq) { return sessionPath(id) + '/messages/' + encodeURIComponent(String(seq)); }
// inputPath is a request inside an MRTR input_required result (message
// seq) by its key; exchangePath an HTTP exchange.
export function inputPath(id, seq, key) { return messagePath(id, seq) + '/inputs/' + encodeURIComponent(key); }
export function exchangePath(id, xid) { return sessionPath(id) + '/exchanges/' + encodeURIComponent(String(xid)); }

// copyText copies to the clipboard, with a fallback for pages the browser
// does not let use the Clipboard API.
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const ta = h('textarea', { class: 'offscreen', readonly: true });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch { ok = false; }
    ta.remove();
    return ok;
  }
}

export function copyButton(label, text) {
  const b = h('button', {
    type: 'button',
    onclick: async () => {
      const ok = await copyText(typeof text === 'function' ? text() : text);
      b.textContent = ok ? 'Copied' : 'Copy failed';
      setTimeout(() => { b.textContent = label; }, 1500);
    },
  }, label);
  return b;
}

export function section(title, ...children) {
  return h('section', { class: 'panel' }, h('h2', {}, title), ...children);
}

export function table(headers, rows, props = {}) {
  return h('table', props,
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows));
}

export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// via says how a session's traffic reached mcptape: its leg (reverse,
// forward, mitm, stdio), and the route or wrapped server's name.
export function via(s) {
  const leg = s.leg || 'reverse';
  return s.route ? `${leg}: ${s.route}` : leg;
}
