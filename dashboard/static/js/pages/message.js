// /sessions/{id}/messages/{seq}: one message. A structured view chosen by
// its shape, the raw JSON one click away as a collapsible tree, the raw
// text, the exchange's (redacted) headers, its SSE event, its versions,
// and an editor for a new version.

import { h, add, chip, clear, clipped, copyButton, dirArrow, fmtBytes, fmtClock, fmtCount, fmtMs, fmtTime, kv, messagePath, ms, section, sessionPath, table } from '../dom.js';
import { api, info, enc } from '../api.js';
import { navigate, status } from '../app.js';
import { jsonTree, parse, structured } from '../view.js';

const RAW_CLIP = 100000;

function rawText(d) {
  if (d.raw !== null && d.raw !== undefined) return d.raw;
  return null;
}

export async function messagePage({ params, main, signal }) {
  const [sid, seqText] = params;
  const seq = Number(seqText);
  const [d, features] = await Promise.all([api('/messages/' + enc(seqText), { signal }), info().then((i) => i.features)]);
  const m = d.message;
  document.title = `Message #${m.seq} · mcptape`;
  const text = rawText(d);
  const parsed = text === null ? { error: 'not UTF-8 text' } : parse(text);

  const head = h('h1', {}, `#${m.seq} `, h('span', { class: 'dir' }, dirArrow(m.dir)), ' ', m.kind,
    m.method ? [' ', h('span', { class: 'method' }, m.method)] : '',
    m.name ? [' ', h('span', { class: 'name' }, clipped(m.name, 80))] : '',
    m.edited ? [' ', chip(`edited ×${m.edited}`, 'edited')] : '');
  const back = h('p', { class: 'crumbs' }, h('a', { href: sessionPath(m.session) }, '← session ', h('span', { class: 'mono' }, clipped(m.session, 60))),
    m.session !== sid ? h('span', { class: 'muted' }, ' (this message belongs to another session than the address said)') : '');
  main.append(back, head);

  const offset = d.session.start ? ms(m.time) - ms(d.session.start) : 0;
  main.append(h('div', { class: 'facts' }, kv([
    ['Time', `${fmtTime(m.time)} (${fmtClock(m.time)}), +${fmtMs(Math.max(0, offset))} into the session`],
    ['Direction', m.dir === 'c2s' ? 'client → server' : 'server → client'],
    ['Id', m.id ? h('code', {}, clipped(m.id, 200)) : '—'],
    ['Size', `${fmtBytes(m.size)}${m.batch >= 0 ? `, element ${m.batch} of a batch` : ''}`],
    ['Exchange', d.exchange ? `#${d.exchange.id} ${d.exchange.method} ${d.exchange.url} → ${d.exchange.status || 'no response'}` : '—'],
    m.links.request ? ['Answers', h('a', { href: messagePath(m.session, m.links.request) }, `#${m.links.request}`)] : null,
    m.links.parent ? ['Inside the call', h('a', { href: messagePath(m.session, m.links.parent) }, `#${m.links.parent}`)] : null,
    m.links.previous ? ['Previous round', h('a', { href: messagePath(m.session, m.links.previous) }, `#${m.links.previous}`)] : null,
    m.links.task ? ['Task', h('a', { href: messagePath(m.session, m.links.task) }, `#${m.links.task}`)] : null,
  ])));

  const tools = h('div', { class: 'row-actions' });
  if (d.curl) tools.append(copyButton('Copy as curl', d.curl));
  if (d.request) tools.append(copyButton('Copy as JSON-RPC request', d.request));
  if (text !== null) tools.append(copyButton('Copy raw', text));
  main.append(tools);

  if ((m.findings || []).length) {
    main.append(section('Findings', h('ul', { class: 'findings' }, m.findings.map((f) => h('li', {}, chip(f.kind, 'finding'), ' ', clipped(f.message, 1000))))));
  }

  // The structured view.
  const view = section('View');
  if (parsed.error) view.append(h('p', { class: 'muted' }, `Not shown structured: ${parsed.error}.`));
  else {
    try { view.append(structured(parsed.value)); } catch (e) { view.append(h('p', { class: 'muted' }, `Not shown structured: ${e.message}`)); }
  }
  main.append(view);

  // Raw JSON as a tree, built when first opened; raw text beside it.
  const rawTree = h('details', { class: 'raw-json' }, h('summary', {}, 'Raw JSON'));
  let built = false;
  rawTree.addEventListener('toggle', () => {
    if (!rawTree.open || built) return;
    built = true;
    if (parsed.error) rawTree.append(h('p', { class: 'muted' }, `Not JSON: ${parsed.error}`));
    else rawTree.append(jsonTree(parsed.value));
  });
  const rawPre = h('details', { class: 'raw-text' }, h('summary', {}, `Raw text (${fmtBytes(m.size)})`));
  rawPre.addEventListener('toggle', () => {
    if (!rawPre.open || rawPre.querySelector('pre')) return;
    rawPre.append(h('pre', { class: 'raw' }, text !== null ? clipped(text, RAW_CLIP) : clipped(d.rawBase64 || '', RAW_CLIP)),
      text === null ? h('p', { class: 'muted' }, 'The bytes are not UTF-8; shown as base64.') : '');
  });
  main.append(section('Raw', rawTree, rawPre));

  // Editing.
  if (features.edit && text !== null) main.append(editor(m, text, parsed));
  if (m.edited) main.append(await versions(m, signal));

  // Headers and SSE.
  if (d.exchange) main.append(headers(d.exchange));
  if (d.sse) {
    main.append(section('SSE event', kv([
      ['Event id', d.sse.id ? h('code', {}, clipped(d.sse.id, 200)) : '—'],
      ['Event type', d.sse.type || '(message)'],
      ['Events in the stream', fmtCount(d.sse.events)],
      d.sse.prefix ? ['Before the data', h('pre', { class: 'raw small' }, clipped(d.sse.prefix, 2000))] : null,
      d.sse.suffix ? ['After the data', h('pre', { class: 'raw small' }, clipped(JSON.stringify(d.sse.suffix), 200))] : null,
      d.sse.whole ? ['The whole block', h('pre', { class: 'raw small' }, clipped(d.sse.whole, 5000))] : null,
    ])));
  }
}

function headers(x) {
  const rows = (hdr) => Object.keys(hdr || {}).sort().flatMap((k) => hdr[k].map((v) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, h('code', {}, clipped(v, 500))))));
  const timing = [];
  if (x.firstByte) timing.push(`first byte after ${fmtMs(ms(x.firstByte) - ms(x.start))}`);
  if (x.end) timing.push(`ended after ${fmtMs(ms(x.end) - ms(x.start))}`);
  const flags = [x.aborted && 'aborted', x.truncated && 'truncated', x.synthesized && 'answered by the proxy'].filter(Boolean);
  return section('Headers',
    h('p', {}, h('code', {}, x.method + ' ', clipped(x.url, 300)), ` → ${x.status || 'no response'}`,
      timing.length ? ` · ${timing.join(', ')}` : '', flags.length ? [' · ', flags.map((f) => chip(f, 'bad'))] : '',
      x.error ? h('span', { class: 'bad' }, ' · ' + x.error) : ''),
    h('div', { class: 'two' },
      h('div', {}, h('h3', {}, `Request (${x.requestBody}, ${fmtBytes(x.requestBytes)})`), table(['Header', 'Value'], rows(x.requestHeader), { class: 'grid headers' })),
      h('div', {}, h('h3', {}, `Response (${x.responseBody}, ${fmtBytes(x.responseBytes)})`), table(['Header', 'Value'], rows(x.responseHeader), { class: 'grid headers' }))),
    h('p', { class: 'muted small' }, 'Secrets were redacted when the traffic was recorded.'));
}

function editor(m, text, parsed) {
  let initial = text;
  if (!parsed.error && text.length < (1 << 20)) {
    try { initial = JSON.stringify(parsed.value, null, 2); } catch { initial = text; }
  }
  const area = h('textarea', { class: 'editor', spellcheck: 'false', rows: '16', 'aria-label': 'the message JSON' });
  area.value = initial;
  const note = h('input', { type: 'text', class: 'note-input', placeholder: 'what changed (optional)', 'aria-label': 'edit note' });
  const check = h('span', { class: 'check', role: 'status' });
  const save = h('button', { type: 'button', class: 'primary save-edit' }, 'Save as a new version');
  const validate = () => {
    const r = parse(area.value);
    check.textContent = r.error ? `Not valid JSON: ${r.error}` : 'Valid JSON';
    check.className = 'check ' + (r.error ? 'bad' : 'ok');
    save.disabled = !!r.error;
    return !r.error;
  };
  let timer;
  area.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(validate, 150); });
  save.addEventListener('click', async () => {
    if (!validate()) return;
    save.disabled = true;
    try {
      const res = await api('/messages/' + m.seq + '/edits', { method: 'POST', body: { raw: area.value, note: note.value } });
      status(`Saved version ${res.version}`, 'ok');
      navigate(messagePath(m.session, m.seq), { replace: true });
    } catch (e) {
      check.textContent = e.message;
      check.className = 'check bad';
      save.disabled = false;
    }
  });
  const box = h('details', { class: 'edit' }, h('summary', {}, 'Edit'),
    h('p', { class: 'muted small' }, 'Saving keeps the recorded message and every earlier version; replays and exports use the latest.'),
    area, h('div', { class: 'row-actions' }, note, save, check));
  validate();
  return section('Edit', box);
}

async function versions(m, signal) {
  const res = await api('/messages/' + m.seq + '/edits', { signal });
  const list = h('ol', { class: 'versions', start: '0' });
  for (const e of res.edits) {
    const body = e.raw !== null && e.raw !== undefined ? e.raw : e.rawBase64;
    const d = h('details', {}, h('summary', {}, e.version === 0 ? 'recorded' : `version ${e.version}`, ' · ', fmtTime(e.time),
      e.note ? [' · ', h('span', { class: 'note' }, clipped(e.note, 200))] : ''));
    d.addEventListener('toggle', () => {
      if (d.open && !d.querySelector('pre')) d.append(h('pre', { class: 'raw small' }, clipped(body, 20000)));
    });
    list.append(h('li', {}, d));
  }
  return section(`Versions (${res.edits.length})`, list);
}
