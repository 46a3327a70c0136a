// /profiles and /profiles/{name}: testing profiles (docs/testing-profiles.md),
// files in the data directory's profiles folder: list, create, edit,
// delete, choose the default.

import { h, chip, clipped, fmtBytes, fmtTime, section, table } from '../dom.js';
import { api, enc } from '../api.js';
import { navigate, status } from '../app.js';

const TEMPLATE = `{
  "name": "NAME",
  "sampling": { "provider": "mock", "template": "mock response to: {{prompt}}" },
  "elicitation": { "default": { "action": "accept" } },
  "roots": []
}
`;

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
  const name = h('input', { type: 'text', name: 'name', placeholder: 'name, e.g. ci', pattern: '[A-Za-z0-9][A-Za-z0-9._-]{0,63}', required: true });
  const form = h('form', { class: 'row-actions' }, name, h('button', { type: 'submit', class: 'primary' }, 'New profile'));
  form.addEventListener('submit', (e) => { e.preventDefault(); navigate('/profiles/' + enc(name.value.trim()) + '?new=1'); });
  main.append(section('Create', form));
  if (res.default) main.append(h('p', {}, h('button', { type: 'button', onclick: () => setDefault('') }, 'Clear the default')));
}

async function setDefault(name) {
  try {
    await api('/default-profile', { method: 'PUT', body: { name } });
    status(name ? `${name} is the default` : 'No default profile', 'ok');
    navigate('/profiles', { replace: true });
  } catch (e) { status(e.message, 'bad'); }
}

async function remove(name) {
  try {
    await api('/profiles/' + enc(name), { method: 'DELETE' });
    status(`Deleted ${name}`, 'ok');
    navigate('/profiles', { replace: true });
  } catch (e) { status(e.message, 'bad'); }
}

export async function profilePage({ params, main, query, signal }) {
  const name = params[0];
  document.title = `Profile ${name} · mcptape`;
  let content = TEMPLATE.replace('NAME', name.replace(/[^A-Za-z0-9._-]/g, ''));
  let isDefault = false;
  let problem = '';
  try {
    const p = await api('/profiles/' + enc(name), { signal });
    content = p.content;
    isDefault = p.default;
    problem = p.error || '';
  } catch (e) {
    if (e.status !== 404 || !query.get('new')) throw e;
  }
  const area = h('textarea', { class: 'editor', spellcheck: 'false', rows: '24', 'aria-label': 'profile JSON' });
  area.value = content;
  const check = h('span', { class: 'check' + (problem ? ' bad' : ''), role: 'status' }, problem);
  const save = h('button', {
    type: 'button', class: 'primary save-profile',
    onclick: async () => {
      try {
        await api('/profiles/' + enc(name), { method: 'PUT', body: { content: area.value } });
        check.textContent = 'Saved';
        check.className = 'check ok';
        status(`Saved ${name}`, 'ok');
      } catch (e) {
        check.textContent = e.message;
        check.className = 'check bad';
      }
    },
  }, 'Save');
  main.append(h('p', { class: 'crumbs' }, h('a', { href: '/profiles' }, '← profiles')),
    h('h1', {}, 'Profile ', h('span', { class: 'mono' }, name), isDefault ? [' ', chip('default', 'ok')] : ''),
    area, h('div', { class: 'row-actions' }, save,
      h('button', { type: 'button', onclick: () => setDefault(name) }, 'Make default'), check));
}
