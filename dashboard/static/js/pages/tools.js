// /tools: the tools of the latest tools/list of each upstream, each with a
// form generated from its inputSchema to compose a call (sent through the
// recorder to the live upstream), "Copy as tools/call", and its history:
// every recorded call of it across sessions (arguments, result summary,
// latency, status) with one click to send it again. What servers describe
// is hostile: all of it is shown as text.

import { h, chip, clipped, fmtMs, fmtTime, copyButton, messagePath } from '../dom.js';
import { api, enc } from '../api.js';
import { compact } from '../view.js';
import { isObj } from '../render/content.js';
import { schemaForm } from '../render/form.js';
import { sentView } from '../render/sent.js';

const MAX_TOOLS = 500;

export async function toolsPage({ main, signal }) {
  document.title = 'Tools · mcptape';
  main.append(h('h1', {}, 'Tools'));
  const res = await api('/tools', { signal });
  if (!res.upstreams.length) {
    main.append(h('p', { class: 'empty' }, 'No tools/list is recorded yet: tools appear here once a client has listed a server\'s tools through the recorder.'));
    main.setAttribute('data-ready', '');
    return;
  }
  main.append(h('p', { class: 'muted' }, res.send
    ? 'Compose a call from a tool\'s form and send it through the recorder to the live upstream, in a session the dashboard opens itself.'
    : 'Sending needs a running recorder: this dashboard serves none, so the forms only compose calls to copy.'));
  for (const u of res.upstreams) {
    const tools = Array.isArray(u.tools) ? u.tools.filter(isObj).slice(0, MAX_TOOLS) : [];
    main.append(h('section', { class: 'panel upstream', 'data-upstream': u.upstream + u.path },
      h('h2', {}, clipped(u.upstream + u.path, 300), ' ', h('span', { class: 'muted small' }, `${tools.length} tools · from `,
        h('a', { href: messagePath(u.session, u.seq) }, `tools/list #${u.seq}`), ` · ${fmtTime(u.time)}`)),
      tools.map((t) => toolBox(u, t, res.send))));
  }
  main.setAttribute('data-ready', '');
}

// toolBox is one tool: its description, form, send and copy, history.
function toolBox(u, t, canSend) {
  const name = typeof t.name === 'string' ? t.name : '?';
  const schema = isObj(t.inputSchema) ? t.inputSchema : { type: 'object' };
  const box = h('details', { class: 'tool', 'data-tool': name });
  const ann = isObj(t.annotations) ? t.annotations : {};
  box.append(h('summary', {}, h('code', { class: 'tool-name' }, clipped(name, 200)),
    typeof t.title === 'string' && t.title ? [' ', clipped(t.title, 200)] : '',
    ann.destructiveHint === true ? [' ', chip('destructive', 'bad')] : '', ann.readOnlyHint === true ? [' ', chip('read-only', 'ok')] : ''));
  let built = false;
  box.addEventListener('toggle', () => {
    if (!box.open || built) return;
    built = true;
    build();
  });
  const build = () => {
    if (typeof t.description === 'string' && t.description) box.append(h('p', { class: 'muted tool-description' }, clipped(t.description, 3000)));
    let form = schemaForm(schema, { label: `arguments of ${name}` });
    const holder = h('div', { class: 'tool-form' }, form.el);
    const check = h('div', { class: 'check', role: 'status' });
    const result = h('div', { class: 'tool-result-box' });
    const request = (args) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
    const send = async (args) => {
      check.textContent = '';
      result.replaceChildren(h('p', { class: 'muted' }, 'Sending…'));
      try {
        const r = await api('/send', { method: 'POST', body: { session: u.session, method: 'tools/call', params: { name, arguments: args } } });
        result.replaceChildren(sentView(r, { method: 'tools/call', tool: t }));
        result.setAttribute('data-done', '');
        loadHistory();
      } catch (e) {
        result.replaceChildren();
        check.textContent = e.message;
        check.className = 'check bad';
      }
    };
    const valid = () => {
      const problems = form.validate();
      if (problems.length) {
        check.textContent = `The form does not validate: ${problems.map((x) => `${x.path} ${x.message}`).join('; ')}`;
        check.className = 'check bad';
        return false;
      }
      check.textContent = '';
      return true;
    };
    const actions = h('div', { class: 'row-actions' });
    if (canSend) actions.append(h('button', { type: 'button', class: 'primary send-tool', onclick: () => { if (valid()) send(form.get() || {}); } }, 'Send'));
    actions.append(copyButton('Copy as tools/call', () => JSON.stringify(request(form.get() || {}), null, 2)));
    box.append(holder, actions, check, result);

    const history = h('div', { class: 'history' });
    const loadHistory = async () => {
      let r;
      try {
        r = await api(`/tools/history?upstream=${enc(u.upstream)}&path=${enc(u.path)}&name=${enc(name)}`);
      } catch (e) {
        history.replaceChildren(h('p', { class: 'bad' }, e.message));
        return;
      }
      if (!r.calls.length) {
        history.replaceChildren(h('p', { class: 'muted' }, 'No recorded call of this tool.'));
        history.setAttribute('data-ready', '');
        return;
      }
      history.replaceChildren(h('div', { class: 'scroll' }, h('table', { class: 'grid history-table' },
        h('thead', {}, h('tr', {}, ['Time', 'Client', 'Arguments', 'Status', 'Result', 'Latency', ''].map((x) => h('th', { scope: 'col' }, x)))),
        h('tbody', {}, r.calls.map((c) => h('tr', { 'data-seq': String(c.seq) },
          h('td', { class: 'nowrap' }, h('a', { href: messagePath(c.session, c.seq) }, fmtTime(c.time))),
          h('td', {}, clipped(c.client || '', 80)),
          h('td', {}, h('code', {}, compact(c.arguments === undefined ? {} : c.arguments, 200))),
          h('td', {}, chip(c.status, c.status === 'success' ? 'ok' : c.status === 'pending' || c.status === 'input_required' ? 'warn' : 'bad')),
          h('td', {}, clipped(c.summary || '', 200)),
          h('td', { class: 'num' }, c.ms !== undefined ? fmtMs(c.ms) : ''),
          h('td', {}, h('button', { type: 'button', class: 'resend', title: 'fill the form with these arguments and send them again', onclick: () => {
            form = schemaForm(schema, { label: `arguments of ${name}`, value: isObj(c.arguments) ? c.arguments : {} });
            holder.replaceChildren(form.el);
            if (canSend) send(isObj(c.arguments) ? c.arguments : {});
          } }, canSend ? 'Send again' : 'Load'))))))));
      history.setAttribute('data-ready', '');
    };
    box.append(h('h3', {}, 'Recorded calls'), history);
    loadHistory();
  };
  return box;
}
