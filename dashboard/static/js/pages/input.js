// /sessions/{id}/messages/{seq}/inputs/{key}: one request embedded in a
// 2026-07-28 input_required result (sampling, elicitation, roots), shown
// as a message of its own, with the answer the client gave in its retry.

import { h, chip, clipped, inputPath, kv, messagePath, section, sessionPath } from '../dom.js';
import { api, enc } from '../api.js';
import { jsonTree } from '../view.js';
import { requestView } from '../render/body.js';

export async function inputPage({ params, main, signal }) {
  const [sid, seqText, key] = params;
  const d = await api('/messages/' + enc(seqText) + '/inputs/' + enc(key), { signal });
  const s = d.session.id || sid;
  document.title = `Input ${d.key} of #${d.in.seq} · mcptape`;
  main.append(h('nav', { class: 'crumbs', 'aria-label': 'where this request is' },
    h('a', { href: sessionPath(s) }, '← session ', h('span', { class: 'mono' }, clipped(s, 60))),
    ' · ', h('a', { href: messagePath(s, d.in.seq), class: 'msg-link' }, `the input_required result #${d.in.seq}`)),
  h('h1', {}, 'Input request ', h('code', {}, clipped(d.key, 100)), ' ', h('span', { class: 'dir' }, '←'), ' ', h('span', { class: 'method' }, clipped(d.method || '?', 100))));
  main.append(h('div', { class: 'facts' }, kv([
    ['Asked in', h('a', { href: messagePath(s, d.in.seq), class: 'msg-link' }, `#${d.in.seq}`), ' (an input_required result)'],
    d.request ? ['Of the round', h('a', { href: messagePath(s, d.request), class: 'msg-link' }, `#${d.request}`)] : null,
    ['Answered in', d.retry ? h('a', { href: messagePath(s, d.retry), class: 'msg-link answer-link' }, `#${d.retry}`, ' (the retry\'s inputResponses)') :
      h('span', { class: 'muted' }, 'no retry in this recording')],
    ['Travels', 'inside the MRTR result, not as a JSON-RPC request of its own: it has no id'],
  ])));
  if ((d.findings || []).length) {
    main.append(section(`Findings (${d.findings.length})`, h('ul', { class: 'findings' }, d.findings.map((f) => h('li', {}, chip(f.kind, 'finding'), ' ', clipped(f.message, 1000))))));
  }
  const answer = d.answer === undefined || d.answer === null ? undefined : d.answer;
  const view = section('View', h('div', { class: 'structured' }, requestView(d.method, d.params, { answer })));
  view.classList.add('message-view');
  if (answer === undefined) view.append(h('p', { class: 'muted' }, d.retry ? 'The retry holds no answer under this key.' : 'Not answered in this recording.'));
  main.append(view);
  if (d.siblings.length) {
    main.append(section('The other input requests of the round', h('ul', { class: 'inputs' }, d.siblings.map((x) =>
      h('li', {}, h('a', { href: inputPath(s, d.in.seq, x.key), class: 'input-link' }, h('code', {}, clipped(x.key, 100))), ' ', h('span', { class: 'method' }, clipped(x.method, 100)))))));
  }
  const raw = h('details', { class: 'raw-json' }, h('summary', {}, 'Raw JSON'));
  raw.addEventListener('toggle', () => {
    if (raw.open && !raw.querySelector('.jtree')) {
      raw.append(h('h3', {}, 'params'), jsonTree(d.params === undefined ? null : d.params));
      if (answer !== undefined) raw.append(h('h3', {}, 'answer'), jsonTree(answer));
    }
  }, { once: false });
  main.append(section('Raw', raw));
}
