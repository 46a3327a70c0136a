// schemaForm: an editable form generated from a JSON Schema, for composing
// tool arguments and answering elicitations. The mapping (MCPOrbit's):
// string → text input (textarea when long or multi-line); number and
// integer → numeric input, with a slider when both bounds exist; boolean
// → switch; enum and titled oneOf → select; array of primitives → chip
// editor (checkboxes for an array of choices); array of objects →
// repeating sub-forms; object → collapsible sub-form; anything else → a
// JSON editor checked against the schema. Every field shows its
// description, a default badge, examples to click, deprecated and
// required marks, and its checks (pattern, bounds, lengths, format) as
// you type. Schemas come from servers we do not control: every string of
// theirs is shown as text, and a pattern that does not compile is
// reported, not run.

import { h, chip, clipped } from '../dom.js';
import { compact } from '../view.js';
import { isObj } from './content.js';
import { choices as choicesOf } from './schema.js';

const MAX_FIELDS = 200;
const MAX_DEPTH = 12;
const MAX_ITEMS = 500;
let seq = 0;

// schemaForm builds a form for schema, filled with value. It returns {el,
// get(), validate()}: get is the value (undefined when empty), validate
// the problems as [{path, message}] (each also shown under its field).
export function schemaForm(schema, { value, label = 'arguments' } = {}) {
  const form = h('form', { class: 'schema-form', 'aria-label': label, novalidate: true });
  form.addEventListener('submit', (e) => e.preventDefault());
  const root = objectFields(isObj(schema) ? schema : {}, value, '', 0);
  form.append(root.el);
  return { el: form, get: root.get, validate: () => root.validate() };
}

// kindOf is the control a schema maps to.
export function kindOf(s) {
  if (!isObj(s)) return 'json';
  const t = Array.isArray(s.type) ? null : s.type;
  if (choicesOf(s).length && t !== 'array' && t !== 'object') return 'select';
  switch (t) {
    case 'string': return 'string';
    case 'number': case 'integer': return 'number';
    case 'boolean': return 'boolean';
    case 'array': {
      const it = isObj(s.items) ? s.items : {};
      if (choicesOf(it).length) return 'multi';
      if (['string', 'number', 'integer', 'boolean'].includes(it.type)) return 'chips';
      if (it.type === 'object' || isObj(it.properties)) return 'objects';
      return 'json';
    }
    case 'object':
      return isObj(s.properties) ? 'object' : 'json';
  }
  if (!t && isObj(s.properties)) return 'object';
  return 'json';
}

function objectFields(schema, value, path, depth) {
  const props = isObj(schema.properties) ? Object.entries(schema.properties).slice(0, MAX_FIELDS) : [];
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((x) => typeof x === 'string') : []);
  const v = isObj(value) ? value : {};
  const box = h('div', { class: 'fields' });
  const kids = props.map(([name, ps]) => {
    const f = field(name, isObj(ps) ? ps : {}, v[name], required.has(name), path ? `${path}.${name}` : name, depth);
    box.append(f.el);
    return [name, f];
  });
  // Values the schema does not describe are kept, as given.
  const extra = Object.keys(v).filter((k) => !props.some(([n]) => n === k));
  if (extra.length) box.append(h('p', { class: 'muted small' }, 'Also sent, not in the schema: ', extra.map((k, i) => [i ? ', ' : '', h('code', {}, clipped(k, 80))])));
  return {
    el: box,
    get: () => {
      const out = {};
      for (const k of extra) out[k] = v[k];
      for (const [name, f] of kids) {
        const x = f.get();
        if (x !== undefined) out[name] = x;
      }
      return out;
    },
    validate: () => kids.flatMap(([, f]) => f.validate()),
  };
}

// field is one labelled control with its marks, hints and live check.
function field(name, s, value, required, path, depth) {
  const id = `sf-${++seq}`;
  const kind = depth >= MAX_DEPTH ? 'json' : kindOf(s);
  const given = value !== undefined;
  const start = given ? value : undefined;
  const err = h('div', { class: 'field-error bad small', role: 'alert', hidden: true });
  const ctl = control(kind, s, start, id, path, depth, required);
  const marks = [];
  if (required) marks.push(h('span', { class: 'required-mark', title: 'required' }, ' *'));
  if (s.deprecated === true) marks.push(' ', chip('deprecated', 'warn deprecated'));
  if ('default' in s) {
    marks.push(' ', h('button', { type: 'button', class: 'chip default-badge', title: 'use the default',
      onclick: () => { ctl.set(s.default); check(); } }, 'default ', compact(s.default, 60)));
  }
  const label = h('label', { for: id, class: 'field-label' }, clipped(typeof s.title === 'string' && s.title ? s.title : name, 200), marks,
    typeof s.title === 'string' && s.title ? h('span', { class: 'muted small' }, ' ', clipped(name, 80)) : '',
    h('span', { class: 'muted small type' }, ' ', kind === 'json' ? describeType(s) : typeWord(s)));
  const row = h('div', { class: `form-row kind-${kind}`, 'data-field': path }, label, ctl.el);
  if (typeof s.description === 'string' && s.description) row.append(h('div', { class: 'muted small description' }, clipped(s.description, 2000)));
  const hints = hintsOf(s);
  if (hints.length) row.append(h('div', { class: 'muted small hint' }, hints.join(' · ')));
  if (Array.isArray(s.examples) && s.examples.length) {
    row.append(h('div', { class: 'examples small' }, h('span', { class: 'muted' }, 'Examples: '),
      s.examples.slice(0, 10).map((ex) => h('button', { type: 'button', class: 'chip example', title: 'use this example',
        onclick: () => { ctl.set(ex); check(); } }, compact(ex, 80)))));
  }
  row.append(err);
  const check = () => {
    const problems = ctl.validate();
    const own = problems.filter((p) => p.path === path);
    err.hidden = own.length === 0;
    err.textContent = own.map((p) => p.message).join('; ');
    row.classList.toggle('invalid', own.length > 0);
    return problems;
  };
  row.addEventListener('input', check);
  row.addEventListener('change', check);
  return {
    el: row,
    get: ctl.get,
    validate: () => {
      const problems = check();
      if (required && ctl.get() === undefined && !problems.some((p) => p.path === path)) {
        const p = { path, message: 'required' };
        err.hidden = false;
        err.textContent = p.message;
        row.classList.add('invalid');
        return [p, ...problems];
      }
      return problems;
    },
  };
}

function typeWord(s) {
  if (Array.isArray(s.type)) return s.type.join(' | ');
  if (s.type === 'array' && isObj(s.items) && typeof s.items.type === 'string') return `${s.items.type}[]`;
  return typeof s.type === 'string' ? s.type : '';
}

function describeType(s) { return typeWord(s) || 'JSON'; }

function hintsOf(s) {
  const out = [];
  const add = (k, label) => { if (typeof s[k] === 'number') out.push(`${label} ${s[k]}`); };
  add('minimum', '≥'); add('exclusiveMinimum', '>'); add('maximum', '≤'); add('exclusiveMaximum', '<');
  add('minLength', 'length ≥'); add('maxLength', 'length ≤'); add('minItems', 'items ≥'); add('maxItems', 'items ≤');
  if (typeof s.pattern === 'string') out.push(`pattern ${s.pattern.length > 200 ? s.pattern.slice(0, 199) + '…' : s.pattern}`);
  if (typeof s.format === 'string') out.push(`format ${s.format}`);
  return out;
}

// control makes the input of one kind: {el, get, set, validate}.
function control(kind, s, value, id, path, depth, required) {
  switch (kind) {
    case 'string': return stringControl(s, value, id, path);
    case 'number': return numberControl(s, value, id, path);
    case 'boolean': return booleanControl(s, value, id, path);
    case 'select': return selectControl(s, value, id, path, required);
    case 'multi': return multiControl(s, value, id, path);
    case 'chips': return chipsControl(s, value, id, path);
    case 'objects': return objectsControl(s, value, id, path, depth);
    case 'object': return objectControl(s, value, id, path, depth);
  }
  return jsonControl(s, value, id, path);
}

function stringControl(s, value, id, path) {
  const long = (typeof s.maxLength === 'number' && s.maxLength > 200) || (typeof value === 'string' && value.includes('\n')) ||
    (typeof s.default === 'string' && s.default.includes('\n')) || s.format === 'textarea' || s['x-multiline'] === true;
  const type = s.format === 'email' ? 'email' : s.format === 'uri' || s.format === 'url' ? 'url' : s.format === 'date' ? 'date' : 'text';
  const el = long ? h('textarea', { id, rows: '4', spellcheck: 'false' }) : h('input', { id, type });
  if (value !== undefined) el.value = typeof value === 'string' ? value : compact(value, 10000);
  return {
    el,
    get: () => (el.value === '' ? undefined : el.value),
    set: (v) => { el.value = typeof v === 'string' ? v : compact(v, 10000); },
    validate: () => {
      const v = el.value;
      if (v === '') return [];
      return stringProblems(s, v).map((message) => ({ path, message }));
    },
  };
}

// stringProblems checks a string against its schema's rules.
export function stringProblems(s, v) {
  const out = [];
  const len = [...v].length;
  if (typeof s.minLength === 'number' && len < s.minLength) out.push(`at least ${s.minLength} characters`);
  if (typeof s.maxLength === 'number' && len > s.maxLength) out.push(`at most ${s.maxLength} characters`);
  if (typeof s.pattern === 'string') {
    const re = compile(s.pattern);
    if (re === null) out.push('the schema\'s pattern does not compile here, so it is not checked');
    else if (!re.test(v)) out.push(`does not match the pattern ${s.pattern.length > 100 ? s.pattern.slice(0, 99) + '…' : s.pattern}`);
  }
  if (s.format === 'email' && !/^[^\s@]+@[^\s@]+$/.test(v)) out.push('not an email address');
  if ((s.format === 'uri' || s.format === 'url') && !/^[A-Za-z][A-Za-z0-9+.-]*:/.test(v)) out.push('not a URI');
  if (s.format === 'date' && !/^\d{4}-\d{2}-\d{2}$/.test(v)) out.push('not a date (YYYY-MM-DD)');
  return out;
}

const patterns = new Map();
function compile(p) {
  if (patterns.has(p)) return patterns.get(p);
  let re = null;
  // JSON Schema patterns are ECMA 262 regular expressions, unanchored.
  // A pattern too long to be a field rule is not run.
  if (p.length <= 1000) {
    try { re = new RegExp(p, 'u'); } catch { re = null; }
  }
  patterns.set(p, re);
  return re;
}

function numberControl(s, value, id, path) {
  const int = s.type === 'integer';
  const el = h('input', { id, type: 'number', step: int ? '1' : 'any' });
  if (typeof s.minimum === 'number') el.min = String(s.minimum);
  if (typeof s.maximum === 'number') el.max = String(s.maximum);
  let slider = null;
  if (typeof s.minimum === 'number' && typeof s.maximum === 'number' && s.maximum > s.minimum) {
    slider = h('input', { type: 'range', class: 'slider', min: String(s.minimum), max: String(s.maximum), step: int ? '1' : 'any',
      'aria-label': 'slider for ' + path });
    slider.addEventListener('input', () => { el.value = slider.value; el.dispatchEvent(new Event('input', { bubbles: true })); });
    el.addEventListener('input', () => { if (el.value !== '') slider.value = el.value; });
  }
  const set = (v) => {
    el.value = typeof v === 'number' ? String(v) : typeof v === 'string' ? v : '';
    if (slider && el.value !== '') slider.value = el.value;
  };
  if (value !== undefined) set(value);
  return {
    el: slider ? h('span', { class: 'number-with-slider' }, el, slider) : el,
    get: () => {
      if (el.value === '') return undefined;
      const n = Number(el.value);
      return Number.isNaN(n) ? el.value : n;
    },
    set,
    validate: () => {
      if (el.value === '') return el.validity.badInput ? [{ path, message: 'not a number' }] : [];
      const n = Number(el.value);
      return numberProblems(s, n).map((message) => ({ path, message }));
    },
  };
}

export function numberProblems(s, n) {
  const out = [];
  if (Number.isNaN(n)) return ['not a number'];
  if (s.type === 'integer' && !Number.isInteger(n)) out.push('a whole number');
  if (typeof s.minimum === 'number' && n < s.minimum) out.push(`at least ${s.minimum}`);
  if (typeof s.maximum === 'number' && n > s.maximum) out.push(`at most ${s.maximum}`);
  if (typeof s.exclusiveMinimum === 'number' && n <= s.exclusiveMinimum) out.push(`more than ${s.exclusiveMinimum}`);
  if (typeof s.exclusiveMaximum === 'number' && n >= s.exclusiveMaximum) out.push(`less than ${s.exclusiveMaximum}`);
  if (typeof s.multipleOf === 'number' && s.multipleOf > 0 && Math.abs(n / s.multipleOf - Math.round(n / s.multipleOf)) > 1e-9) out.push(`a multiple of ${s.multipleOf}`);
  return out;
}

// booleanControl is a switch. Untouched, it shows the default and sends
// nothing (the server applies its default).
function booleanControl(s, value, id) {
  const el = h('input', { id, type: 'checkbox', role: 'switch', class: 'switch' });
  let touched = value !== undefined;
  el.checked = value !== undefined ? value === true : s.default === true;
  el.addEventListener('change', () => { touched = true; });
  return {
    el: h('span', { class: 'switch-box' }, el, h('span', { class: 'switch-text muted small' })),
    get: () => (touched ? el.checked : undefined),
    set: (v) => { el.checked = v === true; touched = true; },
    validate: () => [],
  };
}

function selectControl(s, value, id, path, required) {
  const cs = choicesOf(s);
  const sel = h('select', { id },
    h('option', { value: '' }, required ? '— choose —' : '— none —'),
    cs.map((c, i) => h('option', { value: String(i) }, c.title ? `${c.title} (${compact(c.value, 60)})` : typeof c.value === 'string' ? clipped(c.value, 200).textContent : compact(c.value, 100))));
  const set = (v) => {
    const i = cs.findIndex((c) => JSON.stringify(c.value) === JSON.stringify(v));
    sel.value = i >= 0 ? String(i) : '';
  };
  if (value !== undefined) set(value);
  return {
    el: sel,
    get: () => (sel.value === '' ? undefined : cs[Number(sel.value)].value),
    set,
    validate: () => [],
  };
}

function multiControl(s, value, id, path) {
  const cs = choicesOf(s.items);
  const box = h('div', { id, class: 'choices', role: 'group' });
  const have = Array.isArray(value) ? value.map((v) => JSON.stringify(v)) : [];
  const inputs = cs.map((c) => {
    const cb = h('input', { type: 'checkbox', checked: have.includes(JSON.stringify(c.value)) });
    box.append(h('label', { class: 'choice' }, cb, ' ', c.title ? clipped(c.title, 200) : typeof c.value === 'string' ? clipped(c.value, 200) : compact(c.value, 100)));
    return [cb, c.value];
  });
  let touched = value !== undefined;
  box.addEventListener('change', () => { touched = true; });
  const get = () => (touched ? inputs.filter(([cb]) => cb.checked).map(([, v]) => v) : undefined);
  return {
    el: box,
    get,
    set: (v) => { const want = Array.isArray(v) ? v.map((x) => JSON.stringify(x)) : []; for (const [cb, cv] of inputs) cb.checked = want.includes(JSON.stringify(cv)); touched = true; },
    validate: () => itemsProblems(s, get()).map((message) => ({ path, message })),
  };
}

function itemsProblems(s, list) {
  if (list === undefined) return [];
  const out = [];
  if (typeof s.minItems === 'number' && list.length < s.minItems) out.push(`at least ${s.minItems} items`);
  if (typeof s.maxItems === 'number' && list.length > s.maxItems) out.push(`at most ${s.maxItems} items`);
  if (s.uniqueItems === true && new Set(list.map((x) => JSON.stringify(x))).size !== list.length) out.push('items must differ');
  return out;
}

// chipsControl edits an array of primitives: type a value, Enter or Add
// makes it a chip; × removes one.
function chipsControl(s, value, id, path) {
  const it = s.items;
  const list = Array.isArray(value) ? value.slice(0, MAX_ITEMS) : [];
  let touched = value !== undefined;
  const chips = h('span', { class: 'chip-list' });
  const input = h('input', { id, type: it.type === 'string' ? 'text' : 'text', class: 'chip-input', placeholder: `add ${it.type}`, 'aria-label': `add to ${path}` });
  const err = h('span', { class: 'bad small chip-problem' });
  const draw = () => {
    chips.replaceChildren(...list.map((v, i) => h('span', { class: 'chip chip-value' }, compact(v, 80),
      h('button', { type: 'button', class: 'link remove-chip', 'aria-label': `remove ${compact(v, 40)}`,
        onclick: () => { list.splice(i, 1); touched = true; draw(); chips.dispatchEvent(new Event('input', { bubbles: true })); } }, '×'))));
  };
  const parseItem = (text) => {
    if (it.type === 'string') return { v: text };
    if (it.type === 'boolean') return text === 'true' ? { v: true } : text === 'false' ? { v: false } : { err: 'true or false' };
    const n = Number(text);
    if (text.trim() === '' || Number.isNaN(n)) return { err: 'not a number' };
    if (it.type === 'integer' && !Number.isInteger(n)) return { err: 'a whole number' };
    return { v: n };
  };
  const addOne = () => {
    if (input.value === '') return;
    const r = parseItem(input.value);
    const problems = r.err ? [r.err] : it.type === 'string' ? stringProblems(it, r.v) : it.type === 'boolean' ? [] : numberProblems(it, r.v);
    if (problems.length) { err.textContent = problems.join('; '); return; }
    err.textContent = '';
    list.push(r.v);
    touched = true;
    input.value = '';
    draw();
  };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); addOne(); input.dispatchEvent(new Event('input', { bubbles: true })); } });
  draw();
  return {
    el: h('div', { class: 'chips-editor' }, chips, input, h('button', { type: 'button', class: 'add-chip', onclick: addOne }, 'Add'), err),
    get: () => (touched || list.length ? list.slice() : undefined),
    set: (v) => { list.length = 0; if (Array.isArray(v)) list.push(...v.slice(0, MAX_ITEMS)); touched = true; draw(); },
    validate: () => itemsProblems(s, touched || list.length ? list : undefined).map((message) => ({ path, message })),
  };
}

// objectsControl repeats a sub-form per item of an array of objects.
function objectsControl(s, value, id, path, depth) {
  const it = isObj(s.items) ? s.items : {};
  const items = [];
  const list = h('ol', { class: 'object-items' });
  let touched = value !== undefined;
  const addItem = (v) => {
    const sub = objectFields(it, v, `${path}[${items.length}]`, depth + 1);
    const li = h('li', { class: 'object-item' }, sub.el);
    const entry = { sub, li };
    li.append(h('button', { type: 'button', class: 'remove-item', onclick: () => {
      items.splice(items.indexOf(entry), 1);
      li.remove();
      touched = true;
      list.dispatchEvent(new Event('input', { bubbles: true }));
    } }, 'Remove'));
    items.push(entry);
    list.append(li);
  };
  for (const v of Array.isArray(value) ? value.slice(0, MAX_ITEMS) : []) addItem(v);
  const add = h('button', { type: 'button', class: 'add-item', id, onclick: () => { addItem(undefined); touched = true; } }, 'Add item');
  const get = () => (touched || items.length ? items.map((e) => e.sub.get()) : undefined);
  return {
    el: h('div', { class: 'objects-editor' }, list, add),
    get,
    set: (v) => { for (const e of items.splice(0)) e.li.remove(); for (const x of Array.isArray(v) ? v : []) addItem(x); touched = true; },
    validate: () => [...itemsProblems(s, get()).map((message) => ({ path, message })), ...items.flatMap((e) => e.sub.validate())],
  };
}

// objectControl is a collapsible sub-form.
function objectControl(s, value, id, path, depth) {
  const sub = objectFields(s, value, path, depth + 1);
  const det = h('details', { class: 'sub-form', id, open: depth < 2 }, h('summary', {}, 'fields'), sub.el);
  let touched = value !== undefined;
  det.addEventListener('input', () => { touched = true; });
  det.addEventListener('change', () => { touched = true; });
  return {
    el: det,
    get: () => {
      const v = sub.get();
      return touched || Object.keys(v).length ? v : undefined;
    },
    set: () => {},
    validate: () => (touched ? sub.validate() : []),
  };
}

// jsonControl is a JSON editor, checked against the schema's type and
// choices as you type.
function jsonControl(s, value, id, path) {
  const el = h('textarea', { id, rows: '3', class: 'json-editor', spellcheck: 'false', placeholder: 'JSON' });
  if (value !== undefined) el.value = JSON.stringify(value, null, 2);
  const parsed = () => {
    if (el.value.trim() === '') return { empty: true };
    try { return { v: JSON.parse(el.value) }; } catch (e) { return { err: `not JSON: ${e.message}` }; }
  };
  return {
    el,
    get: () => { const p = parsed(); return p.empty || p.err ? undefined : p.v; },
    set: (v) => { el.value = JSON.stringify(v, null, 2); },
    validate: () => {
      const p = parsed();
      if (p.empty) return [];
      if (p.err) return [{ path, message: p.err }];
      return jsonProblems(s, p.v).map((message) => ({ path, message }));
    },
  };
}

// jsonProblems checks a value against the parts of a schema a person
// reads first: its type(s) and choices.
export function jsonProblems(s, v) {
  if (!isObj(s)) return [];
  const types = Array.isArray(s.type) ? s.type : typeof s.type === 'string' ? [s.type] : [];
  const is = (t) => (t === 'integer' ? Number.isInteger(v) : t === 'number' ? typeof v === 'number' : t === 'array' ? Array.isArray(v) :
    t === 'object' ? isObj(v) : t === 'null' ? v === null : typeof v === t);
  if (types.length && !types.some(is)) return [`must be ${types.join(' or ')}`];
  const cs = choicesOf(s);
  if (cs.length && !Array.isArray(v) && !cs.some((c) => JSON.stringify(c.value) === JSON.stringify(v))) return ['not one of the choices'];
  return [];
}
