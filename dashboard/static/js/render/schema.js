// JSON Schema, as far as people read it: the properties of an object
// schema with their types, titles, descriptions, defaults, choices and
// bounds, and whether each is required.

import { h, chip, clipped } from '../dom.js';
import { compact } from '../view.js';
import { isObj } from './content.js';

const MAX_FIELDS = 200;

// fields lists the properties of an object schema, in their order.
export function fields(schema) {
  if (!isObj(schema) || !isObj(schema.properties)) return [];
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((x) => typeof x === 'string') : []);
  return Object.entries(schema.properties).slice(0, MAX_FIELDS).map(([name, p]) => {
    const s = isObj(p) ? p : {};
    return { name, schema: s, type: typeName(s), title: str(s.title), description: str(s.description),
      required: required.has(name), hasDefault: 'default' in s, default: s.default, choices: choices(s), bounds: bounds(s),
      format: str(s.format) };
  });
}

function str(v) { return typeof v === 'string' ? v : ''; }

// typeName is a schema's type as one word or a union.
export function typeName(s) {
  if (!isObj(s)) return '';
  if (Array.isArray(s.type)) return s.type.filter((t) => typeof t === 'string').join(' | ');
  if (typeof s.type === 'string') {
    if (s.type === 'array' && isObj(s.items)) {
      const inner = typeName(s.items) || (choices(s.items).length ? 'choice' : '');
      return inner ? `${inner}[]` : 'array';
    }
    return s.type;
  }
  if (s.enum || s.oneOf || s.anyOf) return 'choice';
  if (s.$ref) return String(s.$ref).split('/').pop();
  return '';
}

// choices are an enum's values, with titles where the schema gives them
// (oneOf/anyOf of {const, title}, or the legacy enumNames).
export function choices(s) {
  if (!isObj(s)) return [];
  if (Array.isArray(s.enum)) {
    const names = Array.isArray(s.enumNames) ? s.enumNames : [];
    return s.enum.slice(0, 500).map((v, i) => ({ value: v, title: typeof names[i] === 'string' ? names[i] : '' }));
  }
  for (const k of ['oneOf', 'anyOf']) {
    if (Array.isArray(s[k]) && s[k].every((o) => isObj(o) && 'const' in o)) {
      return s[k].slice(0, 500).map((o) => ({ value: o.const, title: str(o.title) }));
    }
  }
  if (isObj(s.items)) return choices(s.items);
  return [];
}

function bounds(s) {
  const out = [];
  const add = (k, label) => { if (typeof s[k] === 'number') out.push(`${label} ${s[k]}`); };
  add('minimum', '≥'); add('exclusiveMinimum', '>'); add('maximum', '≤'); add('exclusiveMaximum', '<');
  add('minLength', 'length ≥'); add('maxLength', 'length ≤'); add('minItems', 'items ≥'); add('maxItems', 'items ≤');
  if (typeof s.pattern === 'string') out.push(`pattern ${s.pattern}`);
  return out;
}

// describe is one field's facts as a line: type, format, bounds, choices,
// default.
export function describe(f) {
  const out = [h('code', { class: 'type' }, f.type || 'any')];
  if (f.required) out.push(' ', chip('required', 'required'));
  if (f.format) out.push(' ', h('span', { class: 'muted' }, clipped(f.format, 40)));
  for (const b of f.bounds) out.push(' ', h('span', { class: 'muted' }, clipped(b, 80)));
  if (f.choices.length) {
    out.push(' ', h('span', { class: 'muted' }, 'one of '),
      f.choices.slice(0, 20).map((c, i) => [i ? ', ' : '', h('code', {}, clipped(compact(c.value, 80), 80)), c.title ? ` (${c.title})` : '']),
      f.choices.length > 20 ? ` … ${f.choices.length - 20} more` : '');
  }
  if (f.hasDefault) out.push(' ', h('span', { class: 'muted' }, 'default '), h('code', {}, clipped(compact(f.default, 200), 200)));
  return out;
}

// schemaTable is an object schema's properties as a table.
export function schemaTable(schema, { caption } = {}) {
  const fs = fields(schema);
  if (fs.length === 0) return h('p', { class: 'muted' }, isObj(schema) ? 'No parameters.' : 'No schema.');
  return h('table', { class: 'grid schema' },
    caption ? h('caption', {}, caption) : '',
    h('thead', {}, h('tr', {}, ['Parameter', 'Type', 'Description'].map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, fs.map((f) => h('tr', { 'data-param': f.name },
      h('th', { scope: 'row' }, h('code', {}, clipped(f.name, 100)), f.title ? h('div', { class: 'muted small' }, clipped(f.title, 200)) : ''),
      h('td', {}, describe(f)),
      h('td', {}, f.description ? clipped(f.description, 2000) : '')))));
}
