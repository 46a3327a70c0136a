// /profiles and /profiles/{name}: testing profiles, files in the data
// directory's profiles folder: list, create, edit (a form for sampling,
// elicitation and roots, with the JSON one click away), delete, choose the
// default.

import { h, chip, clipped, fmtBytes, fmtTime, section, table } from '../dom.js';
import { api, enc } from '../api.js';
import { navigate, status } from '../nav.js';

// NAME is what the server accepts as a profile name (a file name).
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

function nameProblem(n) {
  if (!n) return 'Give the profile a name.';
  if (!NAME.test(n)) return 'A name is 1 to 64 letters, digits, dots, dashes and underscores, starting with a letter or digit.';
  if (n.endsWith('.json') || n === 'default-profile') return `"${n}" cannot be a profile name.`;
  return '';
}

const STARTER = (name) => ({
  name,
  sampling: { provider: 'mock', template: 'mock response to: {{prompt}}' },
  elicitation: { default: { action: 'accept' } },
  roots: [],
});

export async function profilesPage({ main, signal }) {
  document.title = 'Testing profiles · mcptape';
  const res = await api('/profiles', { signal });
  main.append(h('h1', {}, 'Testing profiles'),
    h('p', { class: 'muted' }, 'How replays answer what a recording cannot: sampling, elicitation, roots, faults. Files in ',
      h('code', {}, res.dir), '; use one with ', h('code', {}, 'mcptape replay … --profile FILE'), '.'));
  const rows = res.profiles.map((p) => h('tr', { 'data-profile': p.name },
    h('td', {}, h('a', { href: '/profiles/' + enc(p.name) }, p.name)),
    h('td', {}, p.default ? chip('default', 'ok') : h('button', { type: 'button', class: 'link make-default', onclick: () => setDefault(p.name) }, 'make default')),
    h('td', {}, p.error ? h('span', { class: 'bad' }, clipped(p.error, 200)) : chip('valid', 'ok')),
    h('td', { class: 'num' }, fmtBytes(p.size)),
    h('td', {}, fmtTime(p.modified)),
    h('td', {}, h('button', { type: 'button', class: 'link danger', onclick: () => remove(p.name) }, 'delete'))));
  main.append(rows.length ? table(['Name', 'Default', 'Check', 'Size', 'Modified', ''], rows, { class: 'grid profiles' }) : h('p', { class: 'empty' }, 'No profiles yet.'));
  // The name is checked here, so a bad one never leaves the form.
  const name = h('input', { type: 'text', name: 'name', placeholder: 'name, e.g. ci', maxlength: '64', autocomplete: 'off', 'aria-describedby': 'name-problem' });
  const problem = h('span', { id: 'name-problem', class: 'check bad', role: 'status' });
  const form = h('form', { class: 'row-actions new-profile' }, name, h('button', { type: 'submit', class: 'primary' }, 'New profile'), problem);
  name.addEventListener('input', () => { problem.textContent = ''; });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const n = name.value.trim();
    const why = nameProblem(n) || (res.profiles.some((p) => p.name === n) ? `There is a profile "${n}" already: open it from the list.` : '');
    if (why) {
      problem.textContent = why;
      name.focus();
      return;
    }
    navigate('/profiles/' + enc(n) + '?new=1');
  });
  main.append(section('Create', form));
  if (res.default) main.append(h('p', {}, h('button', { type: 'button', onclick: () => setDefault('') }, 'Clear the default')));
}

async function setDefault(name) {
  try {
    await api('/default-profile', { method: 'PUT', body: { name } });
    navigate('/profiles', { replace: true, notice: [name ? `${name} is the default` : 'No default profile', 'ok'] });
  } catch (e) { status(e.message, 'bad'); }
}

async function remove(name) {
  try {
    await api('/profiles/' + enc(name), { method: 'DELETE' });
    navigate('/profiles', { replace: true, notice: [`Deleted ${name}`, 'ok'] });
  } catch (e) { status(e.message, 'bad'); }
}

function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

export async function profilePage({ params, main, signal }) {
  const name = params[0];
  document.title = `Profile ${name} · mcptape`;
  const why = nameProblem(name);
  if (why) {
    main.append(h('p', { class: 'crumbs' }, h('a', { href: '/profiles' }, '← profiles')), h('h1', {}, 'Not a profile name'), h('p', { class: 'bad' }, why));
    return;
  }
  // The list says whether it exists: no request that fails for a new one.
  const list = await api('/profiles', { signal });
  const entry = list.profiles.find((p) => p.name === name);
  let content = JSON.stringify(STARTER(name), null, 2) + '\n';
  let saved = false;
  let problem = '';
  if (entry) {
    const p = await api('/profiles/' + enc(name), { signal });
    content = p.content;
    saved = true;
    problem = p.error || '';
  }
  let doc = null;
  try { doc = JSON.parse(content); } catch { doc = null; }
  if (!isObj(doc)) doc = null;

  const check = h('span', { class: 'check' + (problem ? ' bad' : ''), role: 'status' }, problem);
  const area = h('textarea', { class: 'editor profile-json', spellcheck: 'false', rows: '24', 'aria-label': 'profile JSON' });
  area.value = content;
  const formBox = h('div', { class: 'profile-form' });
  let editor = null;
  const tabs = h('div', { class: 'tabs', role: 'tablist' });
  const formTab = h('button', { type: 'button', role: 'tab', class: 'tab', 'aria-selected': 'true' }, 'Form');
  const jsonTab = h('button', { type: 'button', role: 'tab', class: 'tab', 'aria-selected': 'false' }, 'JSON');
  tabs.append(formTab, jsonTab);
  let mode = 'form';
  const showForm = () => {
    let d;
    try { d = JSON.parse(area.value); } catch (e) {
      check.textContent = `The JSON does not parse, so the form cannot show it: ${e.message}`;
      check.className = 'check bad';
      return false;
    }
    if (!isObj(d)) {
      check.textContent = 'A profile is a JSON object.';
      check.className = 'check bad';
      return false;
    }
    editor = profileForm(d);
    formBox.replaceChildren(editor.el);
    mode = 'form';
    formBox.hidden = false;
    area.hidden = true;
    formTab.setAttribute('aria-selected', 'true');
    jsonTab.setAttribute('aria-selected', 'false');
    return true;
  };
  const showJSON = () => {
    if (mode === 'form' && editor) area.value = JSON.stringify(editor.value(), null, 2) + '\n';
    mode = 'json';
    formBox.hidden = true;
    area.hidden = false;
    formTab.setAttribute('aria-selected', 'false');
    jsonTab.setAttribute('aria-selected', 'true');
  };
  const clearCheck = () => { check.textContent = ''; check.className = 'check'; };
  formTab.addEventListener('click', () => { clearCheck(); showForm(); });
  jsonTab.addEventListener('click', () => { clearCheck(); showJSON(); });
  const current = () => (mode === 'form' && editor ? JSON.stringify(editor.value(), null, 2) + '\n' : area.value);
  const makeDefault = h('button', { type: 'button', class: 'make-default', disabled: !saved, title: saved ? '' : 'Save the profile first' }, 'Make default');
  makeDefault.addEventListener('click', () => setDefault(name));
  const save = h('button', {
    type: 'button', class: 'primary save-profile',
    onclick: async () => {
      const body = current();
      try { JSON.parse(body); } catch (e) {
        check.textContent = `Not valid JSON: ${e.message}`;
        check.className = 'check bad';
        return;
      }
      try {
        await api('/profiles/' + enc(name), { method: 'PUT', body: { content: body } });
        check.textContent = 'Saved';
        check.className = 'check ok';
        saved = true;
        makeDefault.disabled = false;
        makeDefault.title = '';
        status(`Saved ${name}`, 'ok');
      } catch (e) {
        check.textContent = e.message;
        check.className = 'check bad';
      }
    },
  }, 'Save');
  main.append(h('p', { class: 'crumbs' }, h('a', { href: '/profiles' }, '← profiles')),
    h('h1', {}, 'Profile ', h('span', { class: 'mono' }, name), entry && entry.default ? [' ', chip('default', 'ok')] : '', saved ? '' : [' ', chip('not saved yet', 'warn')]),
    tabs, formBox, area, h('div', { class: 'row-actions' }, save, makeDefault, check));
  if (!doc || !showForm()) showJSON();
}

// profileForm edits the parts of a profile a form can: name, sampling,
// elicitation, roots. Other members (faults, and any the form does not
// know) are kept as they are. value() is the profile.
function profileForm(doc) {
  const d = structuredClone(doc);
  const el = h('div', { class: 'profile-fields' });
  const text = (label, value, attrs = {}) => {
    const input = h('input', { type: 'text', value: value === undefined || value === null ? '' : String(value), ...attrs });
    return { row: h('label', { class: 'field' }, h('span', {}, label), input), input };
  };

  const nameF = text('Name', d.name, { name: 'profile-name', placeholder: 'a label for people' });
  el.append(h('fieldset', {}, h('legend', {}, 'Profile'), nameF.row));

  // Sampling.
  const s = isObj(d.sampling) ? d.sampling : {};
  const provider = h('select', { name: 'provider' }, [['mock', 'mock: answer from a template'], ['manual', 'manual: a person answers in the dashboard']].map(([v, t]) =>
    h('option', { value: v, selected: (s.provider || 'mock') === v }, t)));
  const template = h('textarea', { name: 'template', rows: '2', class: 'template', placeholder: 'mock response to: {{prompt}}' });
  template.value = typeof s.template === 'string' ? s.template : '';
  const model = text('Default model', s.model, { name: 'model', placeholder: 'mcptape-mock' });
  const stopReason = text('Default stop reason', s.stopReason, { name: 'stopReason', placeholder: 'endTurn', list: 'stop-reasons' });
  const reasons = h('datalist', { id: 'stop-reasons' }, ['endTurn', 'stopSequence', 'maxTokens', 'toolUse'].map((r) => h('option', { value: r })));
  const overrides = orderedList('Model-pattern overrides, tried in order (the first whose pattern matches a model hint wins)', 'override',
    Array.isArray(s.overrides) ? s.overrides : [], [
      ['hint', 'hint pattern', 'claude-*'], ['template', 'template', ''], ['model', 'model', ''], ['stopReason', 'stop reason', ''],
    ]);
  const toolUse = orderedList('Tool calls to answer a request that offers tools with', 'tool-use', Array.isArray(s.toolUse) ? s.toolUse : [], [
    ['name', 'tool', 'get_weather'], ['input', 'input (JSON)', '{"city":"Paris"}', 'json'],
  ]);
  const mockOnly = h('div', { class: 'mock-only' }, h('label', { class: 'field wide' }, h('span', {}, 'Template ({{prompt}}: the last user text; {{toolResults}}: the tool results)'), template),
    h('div', { class: 'row-fields' }, model.row, stopReason.row, reasons), overrides.el, toolUse.el);
  const syncProvider = () => { mockOnly.hidden = provider.value === 'manual'; };
  provider.addEventListener('change', syncProvider);
  syncProvider();
  el.append(h('fieldset', { class: 'sampling-fields' }, h('legend', {}, 'Sampling'), h('label', { class: 'field' }, h('span', {}, 'Provider'), provider), mockOnly));

  // Elicitation.
  const e = isObj(d.elicitation) ? d.elicitation : {};
  const rules = orderedList('Rules, tried in order (the first whose message pattern matches answers)', 'rule', Array.isArray(e.rules) ? e.rules : [], [
    ['message', 'message pattern', '*confirm*'], ['action', 'action', 'accept', 'action'], ['content', 'content (JSON, accept only)', '{"name":"Ada"}', 'json'],
  ]);
  const def = isObj(e.default) ? e.default : null;
  const defAction = h('select', { name: 'default-action' }, [['', '(none: decline)'], ['accept', 'accept'], ['decline', 'decline'], ['cancel', 'cancel']].map(([v, t]) =>
    h('option', { value: v, selected: (def && def.action || '') === v }, t)));
  const defContent = h('input', { type: 'text', name: 'default-content', class: 'json', placeholder: '{"name":"Ada Lovelace"}', value: def && def.content !== undefined ? JSON.stringify(def.content) : '' });
  el.append(h('fieldset', { class: 'elicitation-fields' }, h('legend', {}, 'Elicitation'), rules.el,
    h('div', { class: 'row-fields' }, h('label', { class: 'field' }, h('span', {}, 'Default answer'), defAction),
      h('label', { class: 'field wide' }, h('span', {}, 'Default content (JSON)'), defContent))));

  // Roots.
  const roots = orderedList('Roots the client offers', 'root', Array.isArray(d.roots) ? d.roots : [], [['uri', 'URI', 'file:///work'], ['name', 'name', '']]);
  el.append(h('fieldset', { class: 'roots-fields' }, h('legend', {}, 'Roots'), roots.el));

  const others = Object.keys(d).filter((k) => !['name', 'sampling', 'elicitation', 'roots'].includes(k));
  if (others.length) el.append(h('p', { class: 'muted small' }, 'Also in the file, kept as they are (edit them in JSON): ', others.map((k, i) => [i ? ', ' : '', h('code', {}, k)])));

  const value = () => {
    const out = structuredClone(d);
    set(out, 'name', nameF.input.value.trim());
    const samp = isObj(out.sampling) ? out.sampling : {};
    samp.provider = provider.value;
    set(samp, 'template', template.value);
    set(samp, 'model', model.input.value.trim());
    set(samp, 'stopReason', stopReason.input.value.trim());
    setList(samp, 'overrides', overrides.value());
    setList(samp, 'toolUse', toolUse.value());
    out.sampling = samp;
    const el2 = isObj(out.elicitation) ? out.elicitation : {};
    setList(el2, 'rules', rules.value());
    if (defAction.value) {
      el2.default = { action: defAction.value };
      const c = parseJSON(defContent.value);
      if (c !== undefined) el2.default.content = c;
    } else delete el2.default;
    if (Object.keys(el2).length) out.elicitation = el2; else delete out.elicitation;
    out.roots = roots.value();
    return out;
  };
  return { el, value };
}

function set(o, k, v) { if (v === '' || v === undefined) delete o[k]; else o[k] = v; }
function setList(o, k, list) { if (list.length) o[k] = list; else delete o[k]; }

// parseJSON reads a JSON field; text that is not JSON is kept as a string,
// so the server's check names the field.
function parseJSON(t) {
  if (t.trim() === '') return undefined;
  try { return JSON.parse(t); } catch { return t; }
}

// orderedList edits a list of objects, one row each, with fields
// [key, label, placeholder, kind]; rows move up and down (order matters)
// and are added and removed. Members a row does not show are kept.
function orderedList(title, cls, items, fieldsSpec) {
  const body = h('ol', { class: 'ordered ' + cls });
  const rows = [];
  const addRow = (item) => {
    const kept = isObj(item) ? structuredClone(item) : {};
    const inputs = fieldsSpec.map(([key, label, placeholder, kind]) => {
      let input;
      if (kind === 'action') {
        input = h('select', { 'aria-label': label }, ['accept', 'decline', 'cancel'].map((a) => h('option', { value: a, selected: kept[key] === a }, a)));
      } else {
        const v = kept[key];
        input = h('input', { type: 'text', 'aria-label': label, placeholder, class: kind === 'json' ? 'json' : '',
          value: v === undefined ? '' : kind === 'json' ? JSON.stringify(v) : String(v) });
      }
      return [key, input, kind];
    });
    const li = h('li', { class: 'ordered-row' });
    const row = { li, value: () => {
      const o = structuredClone(kept);
      for (const [key, input, kind] of inputs) {
        const v = kind === 'json' ? parseJSON(input.value) : input.value.trim();
        set(o, key, v);
      }
      return o;
    } };
    const move = (dir) => {
      const i = rows.indexOf(row);
      const j = i + dir;
      if (j < 0 || j >= rows.length) return;
      rows.splice(i, 1);
      rows.splice(j, 0, row);
      body.replaceChildren(...rows.map((r) => r.li));
    };
    li.append(...inputs.map(([key, input, kind]) => h('label', { class: 'field' + (kind === 'json' ? ' wide' : '') }, h('span', {}, fieldsSpec.find((f) => f[0] === key)[1]), input)),
      h('span', { class: 'row-buttons' },
        h('button', { type: 'button', class: 'up', title: 'move up', 'aria-label': 'move up', onclick: () => move(-1) }, '↑'),
        h('button', { type: 'button', class: 'down', title: 'move down', 'aria-label': 'move down', onclick: () => move(1) }, '↓'),
        h('button', { type: 'button', class: 'remove danger', title: 'remove', 'aria-label': 'remove', onclick: () => { rows.splice(rows.indexOf(row), 1); li.remove(); } }, '×')));
    rows.push(row);
    body.append(li);
  };
  items.forEach(addRow);
  const el = h('div', { class: 'ordered-list' }, h('div', { class: 'list-title' }, title), body,
    h('button', { type: 'button', class: 'add-' + cls, onclick: () => addRow({}) }, '+ Add'));
  return { el, value: () => rows.map((r) => r.value()).filter((o) => Object.keys(o).length) };
}
