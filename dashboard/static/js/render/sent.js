// The answer to a request the dashboard sent (Send again, the Tools
// page): the response by its reading view, what the server sent on the
// way, and, beside a recorded answer, what differs.

import { h, chip, clipped, fmtMs } from '../dom.js';
import { compact, jsonTree, parse } from '../view.js';
import { messageBody } from './body.js';
import { isObj } from './content.js';

// sentView draws a SendResult. o: {method, tool, recorded (the recorded
// response, parsed)}.
export function sentView(res, { method, tool, recorded } = {}) {
  const out = h('div', { class: 'sent', 'data-status': String(res.status) });
  const resp = res.response !== undefined ? res.response : undefined;
  out.append(h('p', { class: 'sent-head' }, chip(`HTTP ${res.status}`, res.status >= 200 && res.status < 300 ? 'ok' : 'bad'), ' ',
    res.version ? chip(res.version, 'version') : '', ' ', `${fmtMs(res.ms)}`, res.rounds > 1 ? ` · ${res.rounds} rounds` : '',
    ' · sent through the recorder, in a session of the dashboard\'s own'));
  if (resp !== undefined) {
    out.append(h('section', { class: 'sent-response' }, h('h3', {}, 'Answer'), messageBody(resp, { method, tool: tool || undefined })));
  } else {
    out.append(h('p', { class: 'bad' }, 'No JSON-RPC answer came.'), res.body ? h('pre', { class: 'sent-body' }, clipped(res.body, 5000)) : '');
  }
  const on = (res.events || []).filter((e) => e.note || (isObj(e.message) && 'method' in e.message && e.dir === 's2c'));
  if (on.length) {
    out.append(h('section', { class: 'sent-events' }, h('h3', {}, 'On the way'), h('ol', {}, on.map((e) => h('li', {},
      e.dir === 's2c' ? '← ' : '→ ', e.message !== undefined ? h('code', {}, compact(e.message, 300)) : h('code', {}, clipped(e.text || '', 300)),
      e.note ? h('div', { class: 'muted small' }, e.note) : '')))));
  }
  if (recorded !== undefined && resp !== undefined) out.append(diffView(recorded, resp));
  out.append(h('details', { class: 'raw' }, h('summary', {}, 'Raw answer'), jsonTree(resp === undefined ? null : resp)));
  return out;
}

// IGNORED are the members expected to differ between a recording and a
// new run.
const IGNORED = new Set(['id', '_meta']);

// diffView lists what differs between the recorded and the new answer.
export function diffView(recorded, now) {
  const diffs = [];
  diffJSON(recorded, now, '', diffs, 200);
  const sec = h('section', { class: 'diff' }, h('h3', {}, 'Against the recorded answer'));
  if (!diffs.length) {
    sec.append(h('p', { class: 'ok same' }, 'The same as the recorded answer (ids and _meta aside).'));
    return sec;
  }
  sec.append(h('table', { class: 'grid diff-table' },
    h('thead', {}, h('tr', {}, ['Where', 'Recorded', 'Now'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, diffs.map((d) => h('tr', { class: 'diff-' + d.kind },
      h('td', {}, h('code', {}, clipped(d.path || '(the whole answer)', 300))),
      h('td', {}, d.kind === 'added' ? h('span', { class: 'muted' }, '(absent)') : h('code', {}, compact(d.a, 300))),
      h('td', {}, d.kind === 'removed' ? h('span', { class: 'muted' }, '(absent)') : h('code', {}, compact(d.b, 300))))))));
  return sec;
}

// diffJSON collects the paths where a and b differ, at most limit.
export function diffJSON(a, b, path, out, limit) {
  if (out.length >= limit) return;
  const obj = (v) => v !== null && typeof v === 'object';
  if (!obj(a) || !obj(b) || Array.isArray(a) !== Array.isArray(b)) {
    if (JSON.stringify(a) !== JSON.stringify(b)) out.push({ path, kind: 'changed', a, b });
    return;
  }
  if (Array.isArray(a)) {
    for (let i = 0; i < Math.max(a.length, b.length) && out.length < limit; i++) {
      const p = `${path}[${i}]`;
      if (i >= a.length) out.push({ path: p, kind: 'added', b: b[i] });
      else if (i >= b.length) out.push({ path: p, kind: 'removed', a: a[i] });
      else diffJSON(a[i], b[i], p, out, limit);
    }
    return;
  }
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
  for (const k of keys) {
    if (out.length >= limit) return;
    if (path === '' && IGNORED.has(k)) continue;
    if (k === '_meta') continue;
    const p = path ? `${path}.${k}` : k;
    if (!(k in b)) out.push({ path: p, kind: 'removed', a: a[k] });
    else if (!(k in a)) out.push({ path: p, kind: 'added', b: b[k] });
    else diffJSON(a[k], b[k], p, out, limit);
  }
}

export { parse };
