// Views of recorded JSON: a lazy collapsible tree, text with light
// markdown, tables; render/content.js builds the view chosen by a value's
// shape from these. All of it text: recorded content never
// becomes markup, and sizes and depths are bounded so that a 5 MB string or
// JSON nested 10,000 deep leaves the page usable.

import { h, add, clipped, fmtCount } from './dom.js';

export const MAX_DEPTH = 64; // the JSON tree stops opening below this
const LEVEL_ITEMS = 200; // members shown per level before "show more"
const STRING_CLIP = 400;

// parse parses raw JSON text, or returns an error. JSON.parse copes with
// deep nesting; what renders it must not recurse, and nothing here does.
export function parse(text) {
  if (text === null || text === undefined) return { error: 'no text' };
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    return { error: e.message };
  }
}

function isObj(v) { return v !== null && typeof v === 'object'; }

function size(v) { return Array.isArray(v) ? v.length : Object.keys(v).length; }

// scalar is a JSON string, number, boolean or null, as text.
export function scalar(v) {
  if (typeof v === 'string') {
    const el = h('span', { class: 'j-str' });
    add(el, ['"', clipped(v, STRING_CLIP), '"']);
    return el;
  }
  if (v === null) return h('span', { class: 'j-null' }, 'null');
  return h('span', { class: typeof v === 'number' ? 'j-num' : 'j-bool' }, String(v));
}

// jsonTree renders v as a tree whose nodes open on click, one level at a
// time; the first level is open.
export function jsonTree(v) {
  const root = h('div', { class: 'jtree' });
  root.append(jsonNode(null, v, 0, true));
  return root;
}

function jsonNode(key, v, depth, open) {
  const label = key === null ? null : h('span', { class: 'j-key' }, typeof key === 'number' ? String(key) : JSON.stringify(key));
  if (!isObj(v)) {
    return h('div', { class: 'j-row' }, label, label && ': ', scalar(v));
  }
  const arr = Array.isArray(v);
  const n = size(v);
  const summary = arr ? `[…] ${fmtCount(n)} item${n === 1 ? '' : 's'}` : `{…} ${fmtCount(n)} key${n === 1 ? '' : 's'}`;
  const node = h('div', { class: 'j-node' });
  const kids = h('div', { class: 'j-kids', hidden: true });
  let built = false;
  const toggle = h('button', { type: 'button', class: 'j-toggle', 'aria-expanded': 'false' }, '▸');
  const show = (on) => {
    if (on && !built) {
      built = true;
      if (depth + 1 >= MAX_DEPTH) {
        kids.append(h('div', { class: 'j-row muted' }, `nested deeper than ${MAX_DEPTH} levels: see the raw text`));
      } else {
        fill(kids, v, depth + 1, 0);
      }
    }
    kids.hidden = !on;
    toggle.textContent = on ? '▾' : '▸';
    toggle.setAttribute('aria-expanded', on ? 'true' : 'false');
  };
  toggle.addEventListener('click', () => show(kids.hidden));
  node.append(h('div', { class: 'j-row' }, toggle, label, label && ': ', h('span', { class: 'j-sum' }, summary)), kids);
  if (open && n > 0) show(true);
  return node;
}

function fill(kids, v, depth, from) {
  const keys = Array.isArray(v) ? null : Object.keys(v);
  const n = keys ? keys.length : v.length;
  const to = Math.min(n, from + LEVEL_ITEMS);
  for (let i = from; i < to; i++) {
    const k = keys ? keys[i] : i;
    kids.append(jsonNode(k, v[k], depth, false));
  }
  if (to < n) {
    const more = h('button', {
      type: 'button', class: 'link more',
      onclick: () => { more.remove(); fill(kids, v, depth, to); },
    }, `show ${fmtCount(Math.min(LEVEL_ITEMS, n - to))} more of ${fmtCount(n - to)}`);
    kids.append(more);
  }
}

// compact is v as one line of JSON, at most max characters; deep values
// that JSON.stringify cannot take say so.
export function compact(v, max = 200) {
  let t;
  try { t = JSON.stringify(v); } catch { return '[nested too deep to show here]'; }
  if (t === undefined) return '';
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

// Media content blocks become previews only for image/* and audio/* types
// whose data is base64; anything else is described as text.
const MIME = /^(image|audio)\/[a-z0-9][a-z0-9.+-]{0,63}$/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const MAX_MEDIA = 16 << 20;

export function mediaURL(kind, mime, data) {
  if (typeof mime !== 'string' || typeof data !== 'string') return null;
  const m = mime.trim().toLowerCase();
  if (!MIME.test(m) || !m.startsWith(kind + '/') || m === 'image/svg+xml') return null;
  if (data.length === 0 || data.length > MAX_MEDIA || data.length % 4 !== 0 || !BASE64.test(data)) return null;
  return `data:${m};base64,${data}`;
}

// textView shows text content: short text with light markdown (headings,
// lists, code, emphasis) built from text nodes; long text as plain text,
// clipped, with "show all".
export function textView(text) {
  text = String(text);
  if (text.length > 20000) return h('pre', { class: 'text-block' }, clipped(text, 20000));
  return markdown(text);
}

function inline(line) {
  // `code` and **strong**, as text nodes in elements.
  const out = [];
  const re = /(`[^`]+`|\*\*[^*]+\*\*)/g;
  let last = 0;
  for (const m of line.matchAll(re)) {
    if (m.index > last) out.push(line.slice(last, m.index));
    const t = m[0];
    out.push(t.startsWith('`') ? h('code', {}, t.slice(1, -1)) : h('strong', {}, t.slice(2, -2)));
    last = m.index + t.length;
  }
  if (last < line.length) out.push(line.slice(last));
  return out;
}

export function markdown(text) {
  const root = h('div', { class: 'md' });
  const lines = text.split('\n');
  let para = [];
  let list = null;
  const flush = () => {
    if (para.length) {
      const p = h('p');
      para.forEach((l, i) => { if (i) p.append(h('br')); add(p, inline(l)); });
      root.append(p);
      para = [];
    }
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith('```')) {
      flush();
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) code.push(lines[i]);
      root.append(h('pre', { class: 'code' }, code.join('\n')));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*(?:[-*+]|\d+\.)\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      root.append(h('h4', { class: 'md-h' + heading[1].length }, inline(heading[2])));
    } else if (bullet) {
      if (para.length) flush();
      if (!list) { list = h('ul'); root.append(list); }
      list.append(h('li', {}, inline(bullet[1])));
    } else if (line.trim() === '') {
      flush();
    } else {
      list = null;
      para.push(line);
    }
  }
  flush();
  return root;
}

// objTable renders a list of objects as a table: the union of their keys
// as columns (at most 12), 100 rows with "show more".
export function objTable(list) {
  const cols = [];
  for (const row of list.slice(0, 50)) {
    for (const k of Object.keys(row)) if (!cols.includes(k) && cols.length < 12) cols.push(k);
  }
  const tbody = h('tbody');
  const addRows = (from) => {
    const to = Math.min(list.length, from + 100);
    for (let i = from; i < to; i++) {
      const row = list[i];
      tbody.append(h('tr', {}, cols.map((c) => h('td', {}, cell(row[c])))));
    }
    if (to < list.length) {
      const tr = h('tr', {}, h('td', { colspan: cols.length },
        h('button', { type: 'button', class: 'link more', onclick: () => { tr.remove(); addRows(to); } },
          `show ${fmtCount(Math.min(100, list.length - to))} more of ${fmtCount(list.length - to)}`)));
      tbody.append(tr);
    }
  };
  addRows(0);
  return h('div', { class: 'scroll' }, h('table', { class: 'grid' },
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))), tbody));
}

function cell(v) {
  if (v === undefined) return '';
  if (!isObj(v)) return typeof v === 'string' ? clipped(v, 300) : String(v);
  return h('code', {}, clipped(compact(v, 100000), 300));
}
