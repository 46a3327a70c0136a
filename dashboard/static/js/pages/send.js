// /send?from=SEQ: Send again. The recorded client request opens in an
// editor — its params as JSON, and for tools/call as a form generated from
// the tool's inputSchema; headers; or the raw body, malformed allowed when
// confirmed — and goes through the recorder to the live upstream in a
// session the dashboard opens itself. The answer is drawn by its reading
// view and set against the recorded one.

import { h, chip, clipped, messagePath } from '../dom.js';
import { api } from '../api.js';
import { parse } from '../view.js';
import { isObj } from '../render/content.js';
import { schemaForm } from '../render/form.js';
import { sentView } from '../render/sent.js';

// OWN are the 2026-07-28 _meta keys that say who the client is: the
// dashboard's session sends its own.
const OWN = ['io.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/clientInfo', 'io.modelcontextprotocol/clientCapabilities'];

export async function sendPage({ main, query, signal }) {
  document.title = 'Send again · mcptape';
  const from = query.get('from');
  if (!from) {
    main.append(h('h1', {}, 'Send again'), h('p', {}, 'Open a recorded client request and press Send again, or compose a call on the ', h('a', { href: '/tools' }, 'Tools'), ' page.'));
    return;
  }
  const d = await api('/messages/' + encodeURIComponent(from), { signal });
  const m = d.message;
  main.append(h('h1', {}, 'Send again: ', chip(m.method || '?', 'method'), m.name ? [' ', h('code', {}, clipped(m.name, 200))] : ''),
    h('p', { class: 'muted' }, 'From ', h('a', { href: messagePath(m.session, m.seq) }, `message #${m.seq}`),
      '. It goes through the recorder to the live upstream, in a session the dashboard opens itself (recorded as mcptape-dashboard).'));
  if (m.dir !== 'c2s' || m.kind !== 'request') {
    main.append(h('p', { class: 'bad' }, 'Only a client request can be sent again.'));
    return;
  }
  const msg = parse(d.raw).value;
  const params = isObj(msg) && isObj(msg.params) ? structuredClone(msg.params) : {};
  if (isObj(params._meta)) {
    for (const k of OWN) delete params._meta[k];
    if (!Object.keys(params._meta).length) delete params._meta;
  }
  let recorded;
  if (d.related && d.related.response) {
    try {
      const r = await api('/messages/' + d.related.response, { signal });
      recorded = parse(r.raw).value;
    } catch { recorded = undefined; }
  }

  // The editor: form (tools/call with a schema), JSON, raw.
  const schema = m.method === 'tools/call' && d.tool && isObj(d.tool.inputSchema) ? d.tool.inputSchema : null;
  const modes = h('div', { class: 'row-actions modes', role: 'radiogroup', 'aria-label': 'edit as' });
  const panes = {};
  const pick = (name) => {
    for (const [k, p] of Object.entries(panes)) p.hidden = k !== name;
    for (const b of modes.querySelectorAll('button')) b.classList.toggle('primary', b.dataset.mode === name);
    mode = name;
  };
  let mode = schema ? 'form' : 'json';
  let form = null;
  if (schema) {
    form = schemaForm(schema, { value: isObj(params.arguments) ? params.arguments : {}, label: 'tool arguments' });
    panes.form = h('div', { class: 'pane pane-form' }, form.el);
  }
  const json = h('textarea', { class: 'editor params-json', spellcheck: 'false', rows: '12', 'aria-label': 'params as JSON' });
  json.value = JSON.stringify(params, null, 2);
  panes.json = h('div', { class: 'pane pane-json' }, json);
  const raw = h('textarea', { class: 'editor raw-body', spellcheck: 'false', rows: '8', 'aria-label': 'the raw body' });
  raw.value = d.raw || '';
  const rawOK = h('input', { type: 'checkbox', class: 'raw-malformed-ok' });
  panes.raw = h('div', { class: 'pane pane-raw' }, raw, h('label', { class: 'small' }, rawOK, ' The body is not JSON: send it anyway, on purpose (the server\'s answer to it is the point)'));
  for (const [name, label] of [['form', 'Form'], ['json', 'Params (JSON)'], ['raw', 'Raw body']]) {
    if (!panes[name]) continue;
    modes.append(h('button', { type: 'button', 'data-mode': name, class: 'mode-' + name, onclick: () => pick(name) }, label));
  }

  // Headers, added to every request of the session.
  const headerRows = h('div', { class: 'headers-edit' });
  const addHeader = (k = '', v = '') => headerRows.append(h('div', { class: 'row-actions header-row' },
    h('input', { type: 'text', class: 'header-name', value: k, placeholder: 'Header-Name', 'aria-label': 'header name' }),
    h('input', { type: 'text', class: 'header-value', value: v, placeholder: 'value', 'aria-label': 'header value' }),
    h('button', { type: 'button', class: 'link', onclick: (e) => e.target.closest('.header-row').remove() }, 'remove')));
  addHeader();

  const check = h('div', { class: 'check', role: 'status' });
  const result = h('div', { class: 'send-result' });
  const send = h('button', { type: 'button', class: 'primary send', onclick: async () => {
    const body = { session: m.session };
    check.textContent = '';
    check.className = 'check';
    if (mode === 'raw') {
      let ok = true;
      try { JSON.parse(raw.value); } catch { ok = false; }
      if (!ok && !rawOK.checked) {
        check.textContent = 'The raw body is not JSON. Tick the box to send it anyway, or fix it.';
        check.className = 'check bad';
        return;
      }
      body.raw = raw.value;
      body.malformed = !ok;
    } else {
      let p;
      if (mode === 'form') {
        const problems = form.validate();
        if (problems.length) {
          check.textContent = `The form does not validate: ${problems.map((x) => `${x.path} ${x.message}`).join('; ')}`;
          check.className = 'check bad';
          return;
        }
        p = { ...params, arguments: form.get() || {} };
      } else {
        try { p = JSON.parse(json.value); } catch (e) {
          check.textContent = `The params are not JSON: ${e.message}`;
          check.className = 'check bad';
          return;
        }
      }
      body.method = m.method;
      body.params = p;
    }
    const headers = {};
    for (const row of headerRows.querySelectorAll('.header-row')) {
      const k = row.querySelector('.header-name').value.trim();
      if (k) headers[k] = row.querySelector('.header-value').value;
    }
    if (Object.keys(headers).length) body.headers = headers;
    send.disabled = true;
    result.replaceChildren(h('p', { class: 'muted' }, 'Sending…'));
    try {
      const res = await api('/send', { method: 'POST', body });
      result.replaceChildren(sentView(res, { method: m.method, tool: d.tool, recorded: isObj(recorded) ? recorded : undefined }));
      result.setAttribute('data-done', '');
    } catch (e) {
      result.replaceChildren();
      check.textContent = e.message;
      check.className = 'check bad';
    } finally {
      send.disabled = false;
    }
  } }, 'Send');

  main.append(h('section', { class: 'panel send-editor' }, h('h2', {}, 'Request'), modes, ...Object.values(panes),
    h('h3', {}, 'Headers'), headerRows, h('button', { type: 'button', class: 'add-header', onclick: () => addHeader() }, 'Add header'),
    h('div', { class: 'row-actions' }, send, check)), h('section', { class: 'panel' }, h('h2', {}, 'Answer'), result));
  pick(mode);
  main.setAttribute('data-ready', '');
}
