// elicitation/create: the message; a form mode request as the form its
// requestedSchema describes (labels from titles, required marks, choices
// with their titles, defaults, formats), with the answer filled in; a URL
// mode request's URL as text to copy, its elicitation id and the
// notification that completed it. The form is read-only here; built with
// {editable: true} its inputs take values, and values() reads them back
// (for a page that answers live requests).

import { h, chip, clipped, copyButton, kv } from '../dom.js';
import { textView, jsonTree, compact } from '../view.js';
import { isObj, metaFold } from './content.js';
import { fields } from './schema.js';

// flatProblems mirrors the recorder's check of the flat-primitive rule:
// why a schema is not a form the spec allows ("" when it is one).
export function flatProblems(schema) {
  if (!isObj(schema)) return ['no requestedSchema'];
  const out = [];
  if (schema.type !== 'object') out.push(`type is ${JSON.stringify(schema.type)}, not "object"`);
  if (schema.properties !== undefined && !isObj(schema.properties)) out.push('properties is not an object');
  for (const f of fields(schema)) {
    const t = f.schema.type;
    if (t === 'object') out.push(`${f.name} is an object`);
    else if (t === 'array' && !f.choices.length) out.push(`${f.name} is an array that is not a multi-select enum`);
    else if (!['string', 'number', 'integer', 'boolean', 'array'].includes(t)) out.push(`${f.name} has type ${JSON.stringify(t)}`);
  }
  return out;
}

// elicitationRequest draws ElicitRequest params and, when given, the
// result that answered it. links: {complete: href} for the URL mode's
// completion notification.
export function elicitationRequest(params, { answer, links = {}, editable = false, compact: small = false } = {}) {
  const p = isObj(params) ? params : {};
  const mode = p.mode === 'url' ? 'url' : 'form';
  const out = h('div', { class: 'elicitation elicitation-' + mode + (small ? ' small' : '') });
  out.append(h('div', { class: 'elicitation-head' }, chip(mode === 'url' ? 'URL mode' : 'form mode', 'mode'),
    p.mode !== undefined && p.mode !== 'url' && p.mode !== 'form' ? [' ', chip(`mode ${compact(p.mode, 40)}`, 'bad')] : ''));
  const result = isObj(answer) ? answer : null;
  // What the user did comes first: accepted, declined, cancelled.
  if (result) out.append(answerHead(result));
  out.append(h('div', { class: 'elicitation-message' }, typeof p.message === 'string' ? textView(p.message) : h('span', { class: 'muted' }, '(no message)')));
  if (mode === 'url') {
    const url = typeof p.url === 'string' ? p.url : '';
    out.append(kv([
      // The URL is text to read and copy, never a link.
      ['URL', url ? h('span', { class: 'url' }, h('code', {}, clipped(url, 2000)), ' ', copyButton('Copy URL', url)) : h('span', { class: 'bad' }, '(no url)')],
      ['Elicitation id', typeof p.elicitationId === 'string' ? h('code', {}, clipped(p.elicitationId, 200)) : h('span', { class: 'muted' }, '(none: 2026-07-28 has none)')],
      links.complete ? ['Completed by', h('a', { href: links.complete, class: 'complete-link' }, 'notifications/elicitation/complete')] : null,
    ]));
  } else {
    const problems = flatProblems(p.requestedSchema);
    const fs = fields(p.requestedSchema);
    if (problems.length) {
      out.append(h('p', { class: 'warn schema-problem' }, 'This form is outside the flat-primitive rule (', problems.join('; '), '): its schema is shown as JSON.'),
        jsonTree(p.requestedSchema === undefined ? null : p.requestedSchema));
    }
    if (problems.length) {
      // No form to fill in: the answer's content is read as JSON too.
      if (result && result.content !== undefined) out.append(h('div', { class: 'answer-content' }, h('span', { class: 'muted small' }, 'content'), jsonTree(result.content)));
    } else if (fs.length) {
      const values = result && result.action === 'accept' && isObj(result.content) ? result.content : null;
      const form = elicitationForm(p.requestedSchema, { values, editable });
      out.append(form.el);
      if (result && result.action === 'accept' && isObj(result.content)) {
        const extra = Object.keys(result.content).filter((k) => !fs.some((f) => f.name === k));
        if (extra.length) out.append(h('p', { class: 'warn' }, 'The answer also holds fields the form did not ask for: ', extra.map((k, i) => [i ? ', ' : '', h('code', {}, clipped(k, 80))])));
      }
    }
  }
  if (!small && isObj(p._meta)) out.append(metaFold(p._meta));
  return out;
}

// ACTIONS say what each answer means.
const ACTIONS = {
  accept: 'accepted: the form holds the answers given',
  decline: 'declined: the user answered nothing; the form below shows what was asked, with its defaults as defaults',
  cancel: 'cancelled: the user dismissed the form without answering; the form below shows what was asked',
};

function answerHead(result) {
  const action = typeof result.action === 'string' ? result.action : '?';
  const kind = action === 'accept' ? 'ok' : action === 'decline' ? 'warn' : action === 'cancel' ? 'warn' : 'bad';
  return h('div', { class: 'elicitation-answer', 'data-action': action }, h('span', { class: 'muted' }, 'Answer: '), chip(action, kind + ' action'),
    ACTIONS[action] ? h('span', { class: 'muted small' }, ' ', ACTIONS[action]) : '',
    action !== 'accept' && result.content !== undefined ? [' ', h('span', { class: 'warn' }, 'with content, which only accept may carry')] : '',
    action === 'accept' && result.content === undefined ? [' ', h('span', { class: 'muted' }, '(no content)')] : '');
}

// elicitationForm builds the form a requestedSchema describes. values
// fills it; editable leaves it open to input. It returns {el, values()}.
export function elicitationForm(schema, { values = null, editable = false } = {}) {
  const fs = fields(schema);
  const form = h('form', { class: 'elicitation-form' + (editable ? ' editable' : ' readonly'), 'aria-label': 'the requested form' });
  form.addEventListener('submit', (e) => e.preventDefault());
  const getters = [];
  for (const f of fs) {
    const id = 'f-' + Math.random().toString(36).slice(2);
    const v = values && f.name in values ? values[f.name] : undefined;
    const given = values && f.name in values;
    // A form being answered starts from the defaults; a recorded one
    // shows only what was answered, and a default as a default.
    const shown = given ? v : editable && f.hasDefault ? f.default : undefined;
    const label = h('label', { for: id, class: 'field-label' }, clipped(f.title || f.name, 200),
      f.required ? h('span', { class: 'required-mark', title: 'required' }, ' *') : '',
      f.title ? h('span', { class: 'muted small' }, ' ', clipped(f.name, 80)) : '');
    const input = control(f, id, shown, editable);
    const hint = [];
    if (f.description) hint.push(f.description.length > 1000 ? f.description.slice(0, 999) + '…' : f.description);
    if (f.format) hint.push(`format ${f.format}`);
    hint.push(...f.bounds);
    if (f.hasDefault) hint.push(`default ${compact(f.default, 100)}`);
    if (!editable && !given) input.placeholder(f.hasDefault ? `not answered · default: ${compact(f.default, 60)}` : 'not answered');
    const row = h('div', { class: 'form-row' + (given ? ' answered' : ' unanswered'), 'data-field': f.name }, label, input.el,
      hint.length ? h('div', { class: 'muted small hint' }, hint.join(' · ')) : '',
      values && !given && f.required ? h('div', { class: 'bad small' }, 'required, but the answer leaves it out') : '',
      given && !fits(f, v) ? h('div', { class: 'bad small' }, `the answer ${compact(v, 100)} does not fit this field`) : '');
    form.append(row);
    getters.push([f.name, input.get]);
  }
  return { el: form, values: () => Object.fromEntries(getters.map(([k, g]) => [k, g()]).filter(([, v]) => v !== undefined)) };
}

// fits reports whether an answer's value has the type and choices its
// field allows (a hint on the form; the recorder's finding has the full check).
function fits(f, v) {
  const t = f.schema.type;
  if (t === 'boolean') return typeof v === 'boolean';
  if (t === 'integer') return Number.isInteger(v);
  if (t === 'number') return typeof v === 'number';
  if (t === 'array') return Array.isArray(v) && (!f.choices.length || v.every((x) => f.choices.some((c) => c.value === x)));
  if (t === 'string') return typeof v === 'string' && (!f.choices.length || f.choices.some((c) => c.value === v));
  return true;
}

// control is the input for one field.
function control(f, id, shown, editable) {
  const t = f.schema.type;
  const ro = !editable;
  if (t === 'boolean') {
    const el = h('input', { id, type: 'checkbox', checked: shown === true, disabled: ro });
    // Not answered: neither ticked nor not (a default is in the hint).
    return { el, get: () => el.checked, placeholder: () => { el.indeterminate = true; } };
  }
  if (f.choices.length && t === 'array') {
    const set = new Set(Array.isArray(shown) ? shown : []);
    const box = h('div', { id, class: 'choices', role: 'group' });
    const inputs = f.choices.map((c) => {
      const cb = h('input', { type: 'checkbox', checked: set.has(c.value), disabled: ro });
      box.append(h('label', { class: 'choice' }, cb, ' ', c.title ? clipped(c.title, 200) : choiceText(c.value, 200)));
      return [cb, c.value];
    });
    return { el: box, get: () => inputs.filter(([cb]) => cb.checked).map(([, v]) => v), placeholder: () => {} };
  }
  if (f.choices.length) {
    const sel = h('select', { id, disabled: ro },
      h('option', { value: '' }, '—'),
      f.choices.map((c, i) => h('option', { value: String(i), selected: shown !== undefined && c.value === shown },
        c.title ? `${c.title} (${choiceText(c.value, 60)})` : choiceText(c.value, 100))));
    if (shown !== undefined && !f.choices.some((c) => c.value === shown)) {
      sel.append(h('option', { value: 'x', selected: true }, `${compact(shown, 100)} (not a choice)`));
    }
    return { el: sel, get: () => (sel.value === '' || sel.value === 'x' ? undefined : f.choices[Number(sel.value)].value),
      placeholder: (text) => { sel.options[0].textContent = `— (${text})`; } };
  }
  const type = t === 'number' || t === 'integer' ? 'number' : f.format === 'email' ? 'email' : f.format === 'uri' ? 'url' : f.format === 'date' ? 'date' : 'text';
  const el = h('input', { id, type, readonly: ro, 'aria-readonly': ro ? 'true' : undefined,
    step: t === 'integer' ? '1' : t === 'number' ? 'any' : undefined });
  if (typeof f.schema.minimum === 'number') el.min = String(f.schema.minimum);
  if (typeof f.schema.maximum === 'number') el.max = String(f.schema.maximum);
  if (shown !== undefined) {
    // A value of the wrong type still shows, as text.
    if (type === 'number' && typeof shown !== 'number') el.type = 'text';
    el.value = typeof shown === 'string' ? shown : compact(shown, 10000);
  }
  return { el, placeholder: (text) => { el.placeholder = text; }, get: () => {
    if (el.value === '') return undefined;
    if (t === 'number' || t === 'integer') { const n = Number(el.value); return Number.isNaN(n) ? el.value : n; }
    return el.value;
  } };
}

// choiceText is a choice's value as a person reads it: strings as they
// are, anything else as JSON.
function choiceText(v, max) {
  const t = typeof v === 'string' ? v : compact(v, max);
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

// elicitationAnswer draws an ElicitResult against the request's params.
export function elicitationAnswer(result, params) {
  const p = isObj(params) ? params : null;
  if (!p) {
    const r = isObj(result) ? result : {};
    return h('div', { class: 'elicitation' }, answerHead(r), r.content !== undefined ? jsonTree(r.content) : '');
  }
  return elicitationRequest(p, { answer: isObj(result) ? result : {} });
}
