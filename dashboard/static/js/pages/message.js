// /sessions/{id}/messages/{seq}: one message. A view of what the message
// is (a sampling request with its answer, an elicitation form, a tool call
// against its schema, a result by shape, an error as an error), links to
// what it relates to (its request or response, what it set off, the next
// round, the rest of its SSE stream, its exchange), its findings and those
// of its exchange, the raw JSON one click away as a collapsible tree, the
// raw text, the exchange's (redacted) headers, its SSE event, its versions,
// and an editor for a new version.

import { h, chip, clipped, copyButton, dirArrow, exchangePath, inputPath, fmtBytes, fmtClock, fmtCount, fmtMs, fmtTime, kv, messagePath, ms, section, sessionPath, table } from '../dom.js';
import { api, info, enc } from '../api.js';
import { navigate } from '../nav.js';
import { jsonTree, parse } from '../view.js';
import { messageBody } from '../render/body.js';

const RAW_CLIP = 100000;


export async function messagePage({ params, main, signal }) {
  const [sid, seqText] = params;
  const [d, features] = await Promise.all([api('/messages/' + enc(seqText), { signal }), info().then((i) => i.features)]);
  const m = d.message;
  const rel = d.related || { children: [], stream: [] };
  document.title = `Message #${m.seq} · mcptape`;
  const text = d.raw !== null && d.raw !== undefined ? d.raw : null;
  const parsed = text === null ? { error: 'not UTF-8 text' } : parse(text);
  const link = (seq, label) => h('a', { href: messagePath(m.session, seq), class: 'msg-link' }, label || `#${seq}`);

  const head = h('h1', {}, `#${m.seq} `, h('span', { class: 'dir' }, dirArrow(m.dir)), ' ', m.kind,
    m.method ? [' ', h('span', { class: 'method' }, m.method)] : '',
    m.name ? [' ', h('span', { class: 'name' }, clipped(m.name, 80))] : '',
    m.edited ? [' ', chip(`edited ×${m.edited}`, 'edited')] : '');
  const back = h('nav', { class: 'crumbs', 'aria-label': 'where this message is' },
    h('a', { href: sessionPath(m.session) }, '← session ', h('span', { class: 'mono' }, clipped(m.session, 60))),
    d.exchange ? [' · ', h('a', { href: exchangePath(m.session, d.exchange.id), class: 'exchange-link' }, `exchange #${d.exchange.id}`)] : '',
    m.links.request ? [' · ', link(m.links.request, `its request #${m.links.request}`)] : '',
    rel.response ? [' · ', link(rel.response, `its response #${rel.response}`)] : '',
    m.session !== sid ? h('span', { class: 'muted' }, ' (this message belongs to another session than the address said)') : '');
  main.append(back, head);

  const offset = d.session.start ? ms(m.time) - ms(d.session.start) : 0;
  main.append(h('div', { class: 'facts' }, kv([
    ['Time', `${fmtTime(m.time)} (${fmtClock(m.time)}), +${fmtMs(Math.max(0, offset))} into the session`],
    ['Direction', m.dir === 'c2s' ? 'client → server' : 'server → client'],
    ['Id', m.id ? h('code', {}, clipped(m.id, 200)) : '—'],
    ['Size', `${fmtBytes(m.size)}${m.batch >= 0 ? `, element ${m.batch} of a batch` : ''}`],
    ['Exchange', d.exchange ? h('a', { href: exchangePath(m.session, d.exchange.id), class: 'exchange-link' },
      `#${d.exchange.id} ${d.exchange.method} `, clipped(d.exchange.url, 200), ` → ${d.exchange.status || 'no response'}`) : '—'],
    m.links.request ? ['Answers', link(m.links.request)] : null,
    rel.response ? ['Answered by', link(rel.response)] : null,
    m.links.parent ? ['Inside the call', link(m.links.parent)] : null,
    m.links.previous ? ['Previous round', link(m.links.previous)] : null,
    rel.next ? ['Next round', link(rel.next)] : null,
    rel.nextRound ? ['Retried in', link(rel.nextRound)] : null,
    m.links.task ? ['Task', link(m.links.task)] : null,
    rel.complete ? ['Completed by', link(rel.complete, `#${rel.complete} notifications/elicitation/complete`)] : null,
  ])));

  const tools = h('div', { class: 'row-actions' });
  // Send again goes through a reverse route of the recorder; a stdio or
  // forward-proxy session has none (its curl copy says how to repeat it).
  if (m.dir === 'c2s' && m.kind === 'request' && !(d.session && d.session.leg)) tools.append(h('a', { href: '/send?from=' + m.seq, class: 'button send-again' }, 'Send again'));
  if (d.curl) tools.append(copyButton('Copy as curl', d.curl));
  if (d.request) tools.append(copyButton('Copy as JSON-RPC request', d.request));
  if (text !== null) tools.append(copyButton('Copy raw', text));
  if (d.curlNote) tools.append(h('span', { class: 'muted small curl-note' }, d.curl ? 'curl: ' : 'No curl: ', clipped(d.curlNote, 500)));
  main.append(tools);

  const xf = (d.exchange && d.exchange.findings) || [];
  if ((m.findings || []).length || xf.length) {
    const items = [...(m.findings || []).map((f) => [f, '']), ...xf.map((f) => [f, 'of the HTTP exchange'])];
    main.append(section(`Findings (${items.length})`, h('ul', { class: 'findings' }, items.map(([f, where]) =>
      h('li', { class: where ? 'exchange-finding' : '' }, chip(f.kind, 'finding'), ' ', clipped(f.message, 1000),
        where ? h('span', { class: 'muted small' }, ` (${where})`) : '')))));
  }

  // The view.
  const view = section('View');
  view.classList.add('message-view');
  if (parsed.error) view.append(h('p', { class: 'muted' }, `Not shown structured: ${parsed.error}.`));
  else {
    let request = null;
    if (d.request) request = parse(d.request).value || null;
    const answer = d.answer ? parse(d.answer).value : undefined;
    const tool = d.tool ? { ...d.tool, href: messagePath(m.session, d.tool.from) } : null;
    try {
      const body = messageBody(parsed.value, {
        kind: m.kind, method: m.method, request, answer: m.dir === 's2c' ? answer : undefined, tool, inputs: rel.inputs || [],
        inputHref: (key) => inputPath(m.session, m.seq, key),
        links: rel.complete ? { complete: messagePath(m.session, rel.complete) } : {},
      });
      if (m.dir === 'c2s' && m.kind === 'request' && answer !== undefined) {
        // A call and its answer side by side: one page for the call.
        view.append(h('div', { class: 'two call-and-answer' },
          h('div', { class: 'call-request' }, h('h3', {}, 'Request'), body),
          h('div', { class: 'call-answer' }, h('h3', {}, 'Answer ', link(rel.response, `#${rel.response}`)),
            messageBody(answer, { method: m.method, request: parsed.value, tool, inputs: [] }))));
      } else {
        view.append(body);
      }
    } catch (e) {
      view.append(h('p', { class: 'muted' }, `Not shown structured: ${e.message}`));
    }
  }
  main.append(view);

  if (rel.children.length) {
    main.append(section(`What it set off (${fmtCount(rel.children.length + (rel.moreChildren || 0))})`, relatedTable(m.session, rel.children, rel.moreChildren, 'children')));
  }

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

  // The rest of the stream, the headers and the SSE event.
  if (rel.stream.length) {
    main.append(section(`The same ${d.exchange && d.exchange.responseBody === 'sse' ? 'SSE stream' : 'exchange'} (${fmtCount(rel.stream.length + (rel.moreStream || 0))} other messages)`,
      relatedTable(m.session, rel.stream, rel.moreStream, 'stream', d.exchange ? exchangePath(m.session, d.exchange.id) : '')));
  }
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

// relatedTable lists messages with links to them.
export function relatedTable(sid, rows, more, cls, allHref) {
  return h('div', {}, h('div', { class: 'scroll' }, table(['', 'Seq', 'Time', 'Kind', 'Method', 'Name', 'Size'], rows.map((r) => h('tr', { 'data-seq': String(r.seq), class: 'kind-' + r.kind },
    h('td', {}, dirArrow(r.dir)),
    h('td', {}, h('a', { href: messagePath(sid, r.seq) }, `#${r.seq}`)),
    h('td', { class: 'nowrap' }, fmtClock(r.time)),
    h('td', {}, r.kind, (r.findings || []).length ? [' ', chip(`${r.findings.length} finding${r.findings.length === 1 ? '' : 's'}`, 'finding')] : ''),
    h('td', { class: 'method' }, clipped(r.method || '', 80)),
    h('td', {}, clipped(r.name || '', 80)),
    h('td', { class: 'num' }, fmtBytes(r.size)))), { class: 'grid related ' + cls })),
  more ? h('p', { class: 'muted' }, `… and ${fmtCount(more)} more`, allHref ? [' (', h('a', { href: allHref }, 'all of them'), ')'] : '') : '');
}

export function headers(x) {
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
      // The notice outlives the page's re-render (render clears the
      // status line first).
      navigate(messagePath(m.session, m.seq), { replace: true, notice: [`Saved version ${res.version}`, 'ok'] });
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
