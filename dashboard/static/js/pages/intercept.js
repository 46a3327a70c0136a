// /intercept: the messages a running recorder holds in flight, and the
// rules that hold them. Each held message is drawn by its reading view;
// the person forwards it, edits it (JSON checked; bytes that are not JSON
// only when confirmed), answers it in place of the other side, or fails it
// with a JSON-RPC error. A request mcptape answers for the client
// (--answer KIND=person) gets an Inspector-style panel: Auto-respond from
// a testing profile (chosen per request), Edit & Send, Reject; an
// elicitation as a form generated from its requestedSchema and checked;
// a URL-mode elicitation's URL to copy and a Completed action. Held
// content is hostile: all of it is shown as text. New messages appear as
// the live tail announces them (tail.js).

import { h, chip, clipped, fmtMs, messagePath, sessionPath } from '../dom.js';
import { api, enc } from '../api.js';
import { jsonTree, parse } from '../view.js';
import { messageBody } from '../render/body.js';
import { samplingRequest } from '../render/sampling.js';
import { elicitationRequest } from '../render/elicitation.js';
import { isObj } from '../render/content.js';
import { schemaForm } from '../render/form.js';
import { status } from '../nav.js';
import { onTail } from '../tail.js';
import { syncCards, answerer } from '../held.js';

const SAMPLING = 'sampling/createMessage';
const ELICIT = 'elicitation/create';
const ROOTS = 'roots/list';

// TEMPLATES start the answer editor, by method.
const TEMPLATES = {
  [SAMPLING]: { role: 'assistant', content: { type: 'text', text: '' }, model: 'human', stopReason: 'endTurn' },
  [ELICIT]: { action: 'accept', content: {} },
  [ROOTS]: { roots: [] },
  'tools/call': { content: [{ type: 'text', text: '' }] },
};

const WHAT = {
  request: 'client request, held before it is forwarded',
  'server-request': 'server request to the client',
  response: "server's answer",
  notification: 'notification',
  answer: 'to answer for the client',
};

export async function interceptPage({ main, signal }) {
  document.title = 'Intercept · mcptape';
  const intro = h('p', { class: 'muted' });
  const rulesBox = h('section', { class: 'panel rules' });
  const empty = h('p', { class: 'empty' }, 'Nothing is held. Messages the rules match appear here as they arrive; everything else flows.');
  const list = h('div', { class: 'held-list' });
  main.append(h('h1', {}, 'Intercept'), intro, rulesBox, h('h2', {}, 'Held messages'), empty, list);
  const cards = new Map(); // id → {el, since, deadline, age}
  let state = null;
  let rulesDrawn = '';

  const refresh = async () => {
    let res;
    try {
      res = await api('/intercept', { signal });
    } catch (e) {
      if (e.name !== 'AbortError') status(e.message, 'bad');
      return;
    }
    state = res;
    if (!res.active) {
      intro.replaceChildren('Nothing records through this dashboard, so nothing can be held here. Run ',
        h('code', {}, "mcptape record --upstream URL --intercept 'tools/call:delete_*'"),
        ' and open the dashboard address it prints; or set rules on this page of a running recorder.');
      intro.className = 'inactive';
      rulesBox.hidden = true;
      empty.hidden = true;
      list.setAttribute('data-ready', '');
      return;
    }
    intro.replaceChildren('Messages that match a rule wait here until you decide; every other message, and every other event of a held stream, keeps flowing. ',
      res.timeoutMs > 0 ? `A held message goes on unchanged after ${fmtMs(res.timeoutMs)} (the record says so).` : 'A held message waits as long as it takes.');
    const drawn = JSON.stringify(res.rules);
    if (drawn !== rulesDrawn) {
      rulesDrawn = drawn;
      drawRules(rulesBox, res.rules, refresh);
    }
    syncCards(cards, list, empty, res.held, (m, age, gone) => ({
      el: heldCard(m, res, age, gone),
      since: Date.now() - m.ageMs,
      deadline: m.leftMs >= 0 ? Date.now() + m.leftMs : 0,
      age,
    }));
    tick();
    list.setAttribute('data-ready', '');
  };
  const tick = () => {
    for (const c of cards.values()) {
      const held = `held ${fmtMs(Math.max(0, Date.now() - c.since))}`;
      c.age.textContent = c.deadline ? `${held} · goes on unchanged in ${fmtMs(Math.max(0, c.deadline - Date.now()))}` : held;
    }
  };

  await refresh();
  const onChange = () => { refresh(); };
  const stop = onTail('intercept', onChange);
  const poll = setInterval(refresh, 5000);
  const ages = setInterval(tick, 1000);
  return () => {
    stop();
    clearInterval(poll);
    clearInterval(ages);
  };
}

// drawRules shows the rules, each to switch on or off or remove, and a
// field to add one.
function drawRules(box, rules, refresh) {
  const rows = rules.map((r) => ({ ...r }));
  const check = h('span', { class: 'check', role: 'status' });
  const save = async () => {
    try {
      await api('/intercept/rules', { method: 'PUT', body: { rules: rows } });
      check.textContent = 'Saved';
      check.className = 'check ok';
      refresh();
    } catch (e) {
      check.textContent = e.message;
      check.className = 'check bad';
    }
  };
  const list = h('ul', { class: 'rule-list' });
  const draw = () => {
    list.replaceChildren(...rows.map((r, i) => h('li', { 'data-rule': r.rule },
      h('label', {}, h('input', { type: 'checkbox', class: 'rule-enabled', checked: r.enabled, onchange: (e) => { r.enabled = e.target.checked; save(); } }),
        ' ', h('code', {}, clipped(r.rule, 300))),
      ' ', h('button', { type: 'button', class: 'link remove-rule', onclick: () => { rows.splice(i, 1); draw(); save(); } }, 'remove'))));
    if (!rows.length) list.append(h('li', { class: 'muted' }, 'No rules: nothing is held.'));
  };
  draw();
  const input = h('input', { type: 'text', class: 'new-rule', placeholder: "tools/call:delete_*  ·  elicitation/create  ·  response:tools/call", 'aria-label': 'new rule' });
  const add = h('button', { type: 'button', class: 'add-rule', onclick: () => {
    const v = input.value.trim();
    if (!v) return;
    rows.push({ rule: v, enabled: true });
    input.value = '';
    draw();
    save();
  } }, 'Add rule');
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); add.click(); } });
  box.replaceChildren(h('h2', {}, 'Rules'),
    h('p', { class: 'muted small' }, 'METHOD[:NAME] holds requests (the client\'s, or the server\'s sampling, elicitation and roots); response:METHOD[:NAME] the server\'s answers; notification:METHOD notifications. * matches anything.'),
    list, h('div', { class: 'row-actions' }, input, add, check));
}

function parsed(raw) {
  if (typeof raw === 'string') return parse(raw).value;
  return raw;
}

// heldCard shows one held message and what can be done with it; gone is
// called once it is no longer held.
function heldCard(m, st, age, gone) {
  const s = m.session;
  const client = s ? [s.client.name, s.client.version].filter(Boolean).join(' ') : m.client || '';
  const card = h('section', { class: 'panel held', 'data-held-id': m.id, 'data-what': m.what, 'data-method': m.method || '' },
    h('h2', {}, chip(m.what, 'what'), ' ', chip(m.method || '?', 'method'), m.name ? [' ', h('code', {}, clipped(m.name, 200))] : '',
      m.rpcId !== undefined ? [' ', h('span', { class: 'rpc-id' }, 'id ', h('code', {}, clipped(JSON.stringify(m.rpcId), 80)))] : '', ' ', age),
    h('p', { class: 'held-context small' },
      s ? ['Session ', h('a', { href: sessionPath(s.id), class: 'mono held-session' }, clipped(s.id, 60)), ' · ', chip(s.status, 'status-' + s.status)]
        : h('span', { class: 'muted' }, 'Its session is not in the store yet (its first request?)'),
      ' · client ', h('strong', { class: 'held-client' }, clipped(client || 'unknown', 120)),
      s && s.server.name ? [' · server ', clipped([s.server.name, s.server.version].filter(Boolean).join(' '), 120)] : '',
      m.upstream ? [' · ', h('code', {}, clipped(m.upstream, 200))] : ''),
    h('p', { class: 'muted small' }, WHAT[m.what] || m.what, ' · ', m.rule.startsWith('--answer') ? clipped(m.rule, 200) : ['rule ', h('code', {}, clipped(m.rule, 200))],
      m.version ? ` · ${m.version}` : '', m.key ? [' · input ', h('code', {}, clipped(m.key, 100))] : '', ` · hold #${m.id}`));
  const msg = parsed(m.raw);
  const check = h('div', { class: 'check', role: 'status' });
  const buttons = [];
  const answer = answerer('/intercept/', m.id, buttons, check, gone);
  const send = (body, what) => answer(body, `#${m.id}: ${what}`);
  const button = (cls, label, onclick) => {
    const b = h('button', { type: 'button', class: cls, onclick }, label);
    buttons.push(b);
    return b;
  };

  if (m.what === 'answer') {
    card.append(answerPanel(m, msg, st, send, button, check));
    return card;
  }
  const answerable = m.what === 'server-request' && (m.method === SAMPLING || m.method === ELICIT || m.method === ROOTS);
  // The reading view (the answer panel draws a request it answers).
  if (answerable) {
    // drawn by answerPanel below
  } else if (m.what === 'response') {
    const req = parsed(m.request);
    card.append(h('div', { class: 'reading' }, messageBody(msg, { method: m.method, request: req })));
  } else {
    const tool = m.tool && s ? { ...m.tool, href: messagePath(s.id, m.tool.from) } : undefined;
    card.append(h('div', { class: 'reading' }, messageBody(msg, { method: m.method, tool })));
  }
  card.append(h('details', { class: 'raw' }, h('summary', {}, 'Raw message'), jsonTree(msg === undefined ? null : msg)));

  const actions = new Set(m.actions);
  const row = h('div', { class: 'row-actions' });
  if (actions.has('forward')) row.append(button('primary forward', 'Forward', () => send({ action: 'forward' }, 'forwarded')));
  card.append(row);
  if (actions.has('edit')) card.append(editBox(m, msg, send, button, check));
  if (answerable) {
    card.append(answerPanel(m, msg, st, send, button, check, { inPlace: true }));
  } else if (actions.has('answer')) {
    card.append(answerBox(m, send, button));
  }
  if (actions.has('fail')) card.append(failBox(m, send, button));
  card.append(check);
  return card;
}

// editBox edits the message: a held tools/call with the tool's schema as
// a form (the Tools page's), or as JSON, checked as you type; bytes that
// are not JSON go only with the confirmation ticked.
function editBox(m, msg, send, button, check) {
  const area = h('textarea', { class: 'editor edit-json', spellcheck: 'false', rows: '10', 'aria-label': `edit held message ${m.id}` });
  const raw = typeof m.raw === 'string' ? m.raw : JSON.stringify(m.raw, null, 2);
  try { area.value = JSON.stringify(JSON.parse(raw), null, 2); } catch { area.value = raw; }
  const state = h('span', { class: 'json-state small' });
  const confirm = h('input', { type: 'checkbox', class: 'malformed-ok' });
  const confirmLabel = h('label', { class: 'small bad', hidden: true }, confirm, ' This is not JSON: send it anyway, on purpose');
  const validate = () => {
    try {
      JSON.parse(area.value);
      state.textContent = 'valid JSON';
      state.className = 'json-state small ok';
      confirmLabel.hidden = true;
      return true;
    } catch (e) {
      state.textContent = `not JSON: ${e.message}`;
      state.className = 'json-state small bad';
      confirmLabel.hidden = false;
      return false;
    }
  };
  area.addEventListener('input', validate);
  validate();
  const jsonPane = h('div', { class: 'pane pane-json' }, area, h('div', { class: 'row-actions' },
    button('send-edit', 'Forward edited', () => {
      const ok = validate();
      if (!ok && !confirm.checked) {
        check.textContent = 'The edited message is not JSON. Tick the box to send it anyway, or fix it.';
        check.className = 'check bad';
        return;
      }
      send(ok ? { action: 'edit', raw: area.value } : { action: 'edit', raw: area.value, malformed: true }, 'edited and forwarded');
    }), state, confirmLabel));
  const box = h('details', { class: 'edit-box' }, h('summary', {}, 'Edit and forward'));
  const schema = m.method === 'tools/call' && m.tool && isObj(m.tool.inputSchema) && isObj(msg) && isObj(msg.params) ? m.tool.inputSchema : null;
  if (!schema) {
    box.append(jsonPane);
    return box;
  }
  // A tool call: its arguments as the form the tool's inputSchema
  // describes, or the whole message as JSON.
  const form = schemaForm(schema, { value: isObj(msg.params.arguments) ? msg.params.arguments : {}, label: `arguments of ${m.name || 'the tool'}` });
  const formPane = h('div', { class: 'pane pane-form' }, form.el, h('div', { class: 'row-actions' },
    button('send-form', 'Forward with these arguments', () => {
      const problems = form.validate();
      if (problems.length) {
        check.textContent = `The form does not validate: ${problems.map((x) => `${x.path} ${x.message}`).join('; ')}`;
        check.className = 'check bad';
        return;
      }
      const edited = { ...msg, params: { ...msg.params, arguments: form.get() || {} } };
      send({ action: 'edit', raw: JSON.stringify(edited) }, 'edited and forwarded');
    })));
  const pick = (name) => {
    formPane.hidden = name !== 'form';
    jsonPane.hidden = name !== 'json';
    for (const b of modes.querySelectorAll('button')) b.classList.toggle('primary', b.dataset.mode === name);
  };
  const modes = h('div', { class: 'row-actions modes', role: 'group', 'aria-label': 'edit as' },
    h('button', { type: 'button', 'data-mode': 'form', class: 'mode-form', onclick: () => pick('form') }, 'Form'),
    h('button', { type: 'button', 'data-mode': 'json', class: 'mode-json', onclick: () => pick('json') }, 'JSON'));
  box.append(modes, formPane, jsonPane);
  pick('form');
  return box;
}

// answerBox answers a client request in place of the server.
function answerBox(m, send, button) {
  const area = h('textarea', { class: 'editor answer-json', spellcheck: 'false', rows: '8', 'aria-label': `answer to held request ${m.id}` });
  area.value = JSON.stringify(TEMPLATES[m.method] || {}, null, 2);
  const state = h('span', { class: 'small' });
  return h('details', { class: 'answer-box' }, h('summary', {}, 'Answer in place of the server'), area, h('div', { class: 'row-actions' },
    button('answer', 'Answer', () => {
      let result;
      try { result = JSON.parse(area.value); } catch (e) { state.textContent = `not JSON: ${e.message}`; state.className = 'small bad'; return; }
      send({ action: 'answer', result }, 'answered');
    }), state));
}

// failBox fails a request, or replaces a response, with a JSON-RPC error.
function failBox(m, send, button) {
  const code = h('input', { type: 'number', class: 'error-code', value: m.what === 'response' ? '-32603' : '-1', 'aria-label': 'error code' });
  const message = h('input', { type: 'text', class: 'error-message', value: m.what === 'response' ? 'Failed by hand in mcptape' : 'Rejected by hand in mcptape', 'aria-label': 'error message' });
  return h('div', { class: 'row-actions fail-box' },
    button('danger fail', m.what === 'response' ? 'Replace with error' : 'Fail', () => send({ action: 'fail', error: { code: Number(code.value), message: message.value } }, 'failed')),
    'code', code, 'message', message);
}

// answerPanel is the Inspector-style panel that answers a sampling,
// elicitation or roots request for the client.
function answerPanel(m, msg, st, send, button, check, { inPlace = false } = {}) {
  const params = inPlace ? (isObj(msg) ? msg.params : {}) : msg;
  const panel = h('div', { class: 'answer-panel' });
  if (m.method === SAMPLING) panel.append(samplingRequest(isObj(params) ? params : {}));
  else if (m.method !== ELICIT) panel.append(messageBody({ method: m.method, params }, { method: m.method }));

  // The profile to answer from, per request.
  const profile = h('select', { class: 'profile-select', 'aria-label': 'testing profile' },
    h('option', { value: '' }, 'default profile'),
    (st.profiles || []).map((p) => h('option', { value: p, selected: p === m.profile }, p)));
  const suggest = async () => {
    const r = await api(`/intercept/${enc(m.id)}/suggest?profile=${enc(profile.value)}`);
    return r.result;
  };
  const by = () => `a person on the Intercept page, with the ${profile.value ? `testing profile ${profile.value}` : 'default testing profile'}`;
  const reject = button('danger reject', 'Reject', () => send({ action: 'fail', error: { code: -1, message: 'User rejected the request' } }, 'rejected'));

  if (m.method === ELICIT) {
    panel.append(elicitPanel(m, isObj(params) ? params : {}, send, button, check, suggest));
  } else {
    const area = h('textarea', { class: 'editor answer-json', spellcheck: 'false', rows: '8', 'aria-label': `answer to ${m.id}` });
    area.value = JSON.stringify(TEMPLATES[m.method] || {}, null, 2);
    const sendArea = () => {
      let result;
      try { result = JSON.parse(area.value); } catch (e) { check.textContent = `The answer is not JSON: ${e.message}`; check.className = 'check bad'; return; }
      send({ action: 'answer', result }, 'answered');
    };
    panel.append(h('h3', {}, 'Answer'), area, h('div', { class: 'row-actions' },
      button('primary edit-send', 'Edit & Send', sendArea),
      button('load-profile', 'Load from profile', async () => {
        try { area.value = JSON.stringify(await suggest(), null, 2); } catch (e) { check.textContent = e.message; check.className = 'check bad'; }
      })));
  }
  const autoRow = h('div', { class: 'row-actions' });
  if (st.suggest) {
    autoRow.append(button('auto-respond', 'Auto-respond', async () => {
      try {
        const result = await suggest();
        send({ action: 'answer', result, by: by() }, 'answered from the profile');
      } catch (e) {
        check.textContent = e.message;
        check.className = 'check bad';
      }
    }), 'from', profile);
  }
  autoRow.append(reject);
  if (m.actions.includes('forward') && !inPlace) autoRow.append(button('give-client', 'Give it to the client', () => send({ action: 'forward' }, 'given to the client')));
  panel.append(autoRow, check);
  return panel;
}

// elicitPanel answers an elicitation: a form generated from
// requestedSchema, checked before it goes (accept), or decline, cancel; a
// URL-mode request's URL to copy and Completed.
function elicitPanel(m, p, send, button, check, suggest) {
  const out = h('div', { class: 'elicit-panel' });
  if (p.mode === 'url') {
    out.append(elicitationRequest(p, { compact: true }));
    // The request's view has the URL, as text, with its Copy URL button.
    out.append(h('div', { class: 'row-actions' },
      button('primary url-completed', 'Completed', () => send({ action: 'answer', result: { action: 'accept' } }, 'completed')),
      button('elicit-decline', 'Decline', () => send({ action: 'answer', result: { action: 'decline' } }, 'declined')),
      button('elicit-cancel', 'Cancel', () => send({ action: 'answer', result: { action: 'cancel' } }, 'cancelled'))));
    return out;
  }
  out.append(h('div', { class: 'elicitation-head' }, chip('form mode', 'mode')),
    h('div', { class: 'elicitation-message' }, typeof p.message === 'string' ? clipped(p.message, 5000, 'p') : h('p', { class: 'muted' }, '(no message)')));
  let form = schemaForm(isObj(p.requestedSchema) ? p.requestedSchema : {}, { label: 'the requested form' });
  const holder = h('div', { class: 'elicit-form' }, form.el);
  out.append(h('h3', {}, 'Answer the form'), holder, h('div', { class: 'row-actions' },
    button('primary elicit-accept', 'Accept', () => {
      const problems = form.validate();
      if (problems.length) {
        check.textContent = `The form does not validate: ${problems.map((x) => `${x.path} ${x.message}`).join('; ')}`;
        check.className = 'check bad';
        return;
      }
      send({ action: 'answer', result: { action: 'accept', content: form.get() || {} } }, 'accepted');
    }),
    button('elicit-decline', 'Decline', () => send({ action: 'answer', result: { action: 'decline' } }, 'declined')),
    button('elicit-cancel', 'Cancel', () => send({ action: 'answer', result: { action: 'cancel' } }, 'cancelled')),
    button('load-profile', 'Fill from profile', async () => {
      try {
        const r = await suggest();
        form = schemaForm(isObj(p.requestedSchema) ? p.requestedSchema : {}, { label: 'the requested form', value: isObj(r) && isObj(r.content) ? r.content : undefined });
        holder.replaceChildren(form.el);
      } catch (e) {
        check.textContent = e.message;
        check.className = 'check bad';
      }
    })));
  return out;
}
