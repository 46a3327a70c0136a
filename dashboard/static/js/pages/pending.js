// /pending: the requests a replay client waits on a person to answer (a
// testing profile's manual sampling provider). New ones appear as the live
// tail announces them (tail.js). What the live server asks is as
// hostile as recorded content: all of it is shown as text.

import { h, chip, fmtMs } from '../dom.js';
import { api } from '../api.js';
import { jsonTree } from '../view.js';
import { value } from '../render/content.js';
import { samplingRequest } from '../render/sampling.js';
import { elicitationRequest } from '../render/elicitation.js';
import { status } from '../nav.js';
import { onTail } from '../tail.js';
import { syncCards, answerer } from '../held.js';

// TEMPLATE is the answer the editor starts from: a CreateMessageResult.
const TEMPLATE = { role: 'assistant', content: { type: 'text', text: '' }, model: 'human', stopReason: 'endTurn' };

const SAMPLING = 'sampling/createMessage';

export async function pendingPage({ main, signal }) {
  document.title = 'Pending · mcptape';
  const intro = h('p', { class: 'muted' });
  const empty = h('p', { class: 'empty' }, 'Nothing waits for an answer. New requests appear here as the live server sends them.');
  const list = h('div', { class: 'pending-list' });
  main.append(h('h1', {}, 'Pending requests'), intro, empty, list);
  const cards = new Map(); // id → {el, since (ms, local clock), age}

  const refresh = async () => {
    let res;
    try {
      res = await api('/pending', { signal });
    } catch (e) {
      if (e.name !== 'AbortError') status(e.message, 'bad');
      return;
    }
    if (!res.active) {
      intro.replaceChildren(
        'No replay client is waiting on this dashboard. A replay client whose testing profile leaves sampling to a person (',
        h('code', {}, '"sampling": {"provider": "manual"}'), ') serves its own dashboard and lists the sampling requests it waits on there: run ',
        h('code', {}, 'mcptape replay client --tape FILE --target URL --profile manual.json'),
        ' and open the address it prints.');
      intro.className = 'inactive';
      empty.hidden = true;
      list.setAttribute('data-ready', '');
      return;
    }
    intro.replaceChildren('The live server asked these; the replay client waits for your answers (see ',
      h('code', {}, '--manual-timeout'), '). Edit an answer and press Answer, or refuse with an error.');
    syncCards(cards, list, empty, res.requests, (r, age, gone) => ({ el: pendingCard(r, age, gone), since: Date.now() - r.ageMs, age }));
    tick();
    list.setAttribute('data-ready', '');
  };
  const tick = () => {
    for (const c of cards.values()) c.age.textContent = `waiting ${fmtMs(Math.max(0, Date.now() - c.since))}`;
  };

  await refresh();
  const onPending = () => { refresh(); };
  const stop = onTail('pending', onPending);
  // Belt and braces for a live tail that lost an event; and the ages.
  const poll = setInterval(refresh, 5000);
  const ages = setInterval(tick, 1000);
  return () => {
    stop();
    clearInterval(poll);
    clearInterval(ages);
  };
}

function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

// pendingCard shows one request and the form that answers it; gone is
// called once the request no longer waits.
function pendingCard(r, age, gone) {
  const params = isObj(r.params) ? r.params : {};
  const card = h('section', { class: 'panel pending', 'data-pending-id': r.id, 'data-method': r.method },
    h('h2', {}, chip(r.method, 'method'), ` #${r.id} `, age));
  if (r.method === SAMPLING) card.append(samplingRequest(params));
  else if (r.method === 'elicitation/create') card.append(elicitationRequest(params));
  else card.append(value(r.params));
  card.append(h('details', { class: 'raw-params' }, h('summary', {}, 'Raw params'), jsonTree(r.params === undefined ? null : r.params)));

  const editor = h('textarea', { class: 'editor answer-json', spellcheck: 'false', rows: '10', 'aria-label': `answer to request ${r.id} (JSON)` });
  editor.value = JSON.stringify(r.method === SAMPLING ? TEMPLATE : {}, null, 2);
  const check = h('span', { class: 'check', role: 'status' });
  const code = h('input', { type: 'number', class: 'error-code', value: '-1', 'aria-label': 'error code' });
  const message = h('input', { type: 'text', class: 'error-message', value: 'User rejected the sampling request', 'aria-label': 'error message' });
  const buttons = [];
  const reply = answerer('/pending/', r.id, buttons, check, gone);
  const send = (body) => reply(body, `Answered #${r.id}`);
  const answer = h('button', {
    type: 'button', class: 'primary answer',
    onclick: () => {
      let result;
      try {
        result = JSON.parse(editor.value);
      } catch (e) {
        check.textContent = `The answer is not JSON: ${e.message}`;
        check.className = 'check bad';
        return;
      }
      send({ result });
    },
  }, 'Answer');
  const refuse = h('button', {
    type: 'button', class: 'danger answer-error',
    onclick: () => send({ error: { code: Number(code.value), message: message.value } }),
  }, 'Answer with error');
  buttons.push(answer, refuse);
  card.append(h('h3', {}, 'Your answer'), editor,
    h('div', { class: 'row-actions' }, answer, check),
    h('div', { class: 'row-actions' }, refuse, 'code', code, 'message', message));
  return card;
}
