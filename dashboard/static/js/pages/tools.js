// /tools: every tool each upstream listed (the union of its tools/list
// answers, each marked by when it was seen, so that a client that lists
// fewer does not hide the others), each with a form generated from its
// inputSchema to compose a call, sent through the recorder to the upstream
// that listed it (by the route that reaches it; or not, with the reason),
// "Copy as tools/call", and its history a page at a time: the recorded
// calls of it across sessions (arguments, result summary, latency,
// status) with one click to send one again. While a call is on its way
// the page says who it waits on: the Intercept page holding it, the
// server's progress. What servers describe is hostile: all of it is
// shown as text.

import { h, chip, clipped, fmtMs, fmtTime, copyButton, messagePath } from '../dom.js';
import { api, enc } from '../api.js';
import { compact } from '../view.js';
import { isObj } from '../render/content.js';
import { schemaForm } from '../render/form.js';
import { sentView } from '../render/sent.js';
import { onTail } from '../tail.js';

const MAX_TOOLS = 500;
const PAGE = 20;

export async function toolsPage({ main, signal }) {
  document.title = 'Tools · mcptape';
  main.append(h('h1', {}, 'Tools'));
  const res = await api('/tools', { signal });
  if (!res.upstreams.length) {
    main.append(h('p', { class: 'empty' }, 'No tools/list is recorded yet: tools appear here once a client has listed a server\'s tools through the recorder.'));
    main.setAttribute('data-ready', '');
    return undefined;
  }
  main.append(h('p', { class: 'muted' }, res.send
    ? 'Compose a call from a tool\'s form and send it through the recorder to the upstream that listed it, in a session the dashboard opens itself.'
    : 'Sending needs a running recorder: this dashboard serves none, so the forms only compose calls to copy.'));
  const stops = [];
  for (const u of res.upstreams) {
    const tools = Array.isArray(u.tools) ? u.tools.filter(isObj).slice(0, MAX_TOOLS) : [];
    const seen = new Map((u.seen || []).map((x) => [x.name, x]));
    // A tool listed later than the upstream's first listing is new since.
    const firstListing = Math.min(...(u.seen || []).map((x) => Date.parse(x.first)));
    const gone = (u.seen || []).filter((x) => !x.latest).length;
    main.append(h('section', { class: 'panel upstream', 'data-upstream': u.upstream + u.path, 'data-send': u.send.ok ? 'ok' : 'off' },
      h('h2', {}, clipped(u.upstream + u.path, 300), ' ', h('span', { class: 'muted small' }, `${tools.length} tools from ${u.listings} tools/list answer${u.listings === 1 ? '' : 's'} · latest `,
        h('a', { href: messagePath(u.session, u.seq) }, `#${u.seq}`), ` · ${fmtTime(u.time)}`, gone ? ` · ${gone} not in the latest` : '')),
      res.send ? h('p', { class: u.send.ok ? 'muted small send-to' : 'warn small send-off' },
        u.send.ok ? ['Calls go through the recorder', u.send.route ? [' by the route ', h('code', {}, clipped(u.send.route, 80))] : '', ' to this upstream.'] : ['Sending is off here: ', u.send.reason]) : '',
      tools.map((t) => toolBox(u, t, seen.get(t.name), firstListing, res.send && u.send.ok, stops))));
  }
  main.setAttribute('data-ready', '');
  return () => { for (const stop of stops) stop(); };
}

// toolBox is one tool: its description, form, send and copy, history.
function toolBox(u, t, seen, firstListing, canSend, stops) {
  const name = typeof t.name === 'string' ? t.name : '?';
  const schema = isObj(t.inputSchema) ? t.inputSchema : { type: 'object' };
  const box = h('details', { class: 'tool', 'data-tool': name, 'data-latest': seen && !seen.latest ? 'no' : 'yes' });
  const ann = isObj(t.annotations) ? t.annotations : {};
  box.append(h('summary', {}, h('code', { class: 'tool-name' }, clipped(name, 200)),
    typeof t.title === 'string' && t.title ? [' ', clipped(t.title, 200)] : '',
    ann.destructiveHint === true ? [' ', chip('destructive', 'bad')] : '', ann.readOnlyHint === true ? [' ', chip('read-only', 'ok')] : '',
    seen && !seen.latest ? [' ', chip(`not in the latest tools/list · last seen ${fmtTime(seen.last)}`, 'warn seen')] : '',
    seen && Date.parse(seen.first) > firstListing ? h('span', { class: 'muted small seen-since' }, ` new since ${fmtTime(seen.first)}`) : ''));
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
      const waiting = h('p', { class: 'muted waiting', role: 'status' }, 'Sending…');
      result.replaceChildren(waiting);
      const stop = watchCall(name, waiting);
      stops.push(stop);
      try {
        // A progress token: a server that reports progress does, and the
        // page shows it as the call goes.
        const params = { name, arguments: args, _meta: { progressToken: `mcptape-tools-${Date.now()}` } };
        const r = await api('/send', { method: 'POST', body: { session: u.session, method: 'tools/call', params } });
        result.replaceChildren(sentView(r, { method: 'tools/call', tool: t }));
        result.setAttribute('data-done', '');
        loadHistory(0);
      } catch (e) {
        result.replaceChildren();
        check.textContent = e.message;
        check.className = 'check bad';
      } finally {
        stop();
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
    else actions.append(h('button', { type: 'button', class: 'send-tool', disabled: true, title: u.send.reason || 'sending needs a running recorder' }, 'Send'));
    actions.append(copyButton('Copy as tools/call', () => JSON.stringify(request(form.get() || {}), null, 2)));
    box.append(holder, actions, check, result);

    const history = h('div', { class: 'history' });
    const tbody = h('tbody');
    const more = h('button', { type: 'button', class: 'more-history', onclick: () => loadHistory(shown) }, 'Show older calls');
    let shown = 0;
    const loadHistory = async (from) => {
      let r;
      try {
        r = await api(`/tools/history?upstream=${enc(u.upstream)}&path=${enc(u.path)}&name=${enc(name)}&offset=${from}&limit=${PAGE}`);
      } catch (e) {
        history.replaceChildren(h('p', { class: 'bad' }, e.message));
        return;
      }
      if (from === 0) {
        tbody.replaceChildren();
        shown = 0;
      }
      if (from === 0 && !r.calls.length) {
        history.replaceChildren(h('p', { class: 'muted' }, 'No recorded call of this tool.'));
        history.setAttribute('data-ready', '');
        return;
      }
      tbody.append(...r.calls.map((c) => h('tr', { 'data-seq': String(c.seq) },
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
        } }, canSend ? 'Send again' : 'Load')))));
      shown += r.calls.length;
      more.hidden = !r.more;
      if (from === 0) {
        history.replaceChildren(h('div', { class: 'scroll' }, h('table', { class: 'grid history-table' },
          h('thead', {}, h('tr', {}, ['Time', 'Client', 'Arguments', 'Status', 'Result', 'Latency', ''].map((x) => h('th', { scope: 'col' }, x)))),
          tbody)), more);
      }
      history.setAttribute('data-ready', '');
    };
    box.append(h('h3', {}, 'Recorded calls'), history);
    loadHistory(0);
  };
  return box;
}

// watchCall says, while a call of tool is on its way, whom it waits on:
// the Intercept page holding it (the dashboard's own client's call), the
// progress the server reports in the dashboard's session. It returns
// the function that stops watching.
function watchCall(tool, el) {
  const since = Date.now();
  const mine = new Set(); // sessions of the dashboard's own client since the send began
  let held = null;
  let progress = null;
  const draw = () => {
    const parts = [];
    if (held) {
      parts.push('Held on the ', h('a', { href: '/intercept', class: 'held-link' }, 'Intercept page'),
        ` by the rule ${held.rule} for ${fmtMs(Date.now() - Date.parse(held.since))}: it goes on once someone decides there.`);
    }
    if (progress) {
      const p = progress;
      parts.push(parts.length ? ' ' : '', h('span', { class: 'progress-note' }, `Progress ${p.progress}${p.total ? `/${p.total}` : ''}${p.message ? ` — ${p.message}` : ''}`), ' (the server reports it as it works).');
    }
    if (!parts.length) parts.push(`Sending… (${fmtMs(Date.now() - since)})`);
    el.replaceChildren(...parts);
  };
  const checkHeld = async () => {
    try {
      const r = await api('/intercept');
      held = (r.held || []).find((m) => m.method === 'tools/call' && m.name === tool && m.what === 'request' &&
        ((m.session && m.session.client.name === 'mcptape-dashboard') || m.client === 'mcptape-dashboard')) || null;
    } catch { held = null; }
    draw();
  };
  const stops = [
    onTail('intercept', checkHeld),
    onTail('session', (s) => { if (s.client && s.client.name === 'mcptape-dashboard' && Date.parse(s.start) >= since - 1000) mine.add(s.id); }),
    onTail('message', (m) => {
      if (m.method === 'notifications/progress' && m.progress && mine.has(m.session)) {
        progress = m.progress;
        draw();
      }
    }),
  ];
  checkHeld();
  // A held message's session may be stored a moment after it is held:
  // look again each second while the call waits.
  const tick = setInterval(checkHeld, 1000);
  return () => { clearInterval(tick); for (const stop of stops) stop(); };
}
