// /import: read a tape file (mcptape export) into the store.

import { h, clipped, sessionPath } from '../dom.js';
import { api } from '../api.js';
import { status } from '../nav.js';

export function importPage({ main }) {
  document.title = 'Import a tape · mcptape';
  const file = h('input', { type: 'file', name: 'tape', accept: '.json,application/json' });
  const result = h('div', { class: 'import-result', role: 'status' });
  const go = h('button', {
    type: 'button', class: 'primary',
    onclick: async () => {
      const f = file.files && file.files[0];
      if (!f) { result.textContent = 'Choose a tape file first.'; return; }
      go.disabled = true;
      result.textContent = 'Importing…';
      try {
        const res = await api('/tapes', { method: 'POST', body: f });
        result.replaceChildren(h('p', {}, `Imported ${res.sessions.length} session(s):`),
          h('ul', {}, res.sessions.map((id) => h('li', {}, h('a', { href: sessionPath(id), class: 'mono' }, clipped(id, 80))))));
        status('Tape imported', 'ok');
      } catch (e) {
        result.replaceChildren(h('p', { class: 'bad' }, e.message));
      }
      go.disabled = false;
    },
  }, 'Import');
  main.append(h('h1', {}, 'Import a tape'),
    h('p', { class: 'muted' }, 'A tape is the file ', h('code', {}, 'mcptape export'), ' writes. Sessions whose id the store holds already get a new one.'),
    h('div', { class: 'row-actions' }, file, go), result);
}
