// /sessions/{id}/exchanges/{xid}: one HTTP exchange: its request line,
// timing, findings and (redacted) headers, and its messages in order (an
// SSE stream's events).

import { h, chip, clipped, fmtCount, section, sessionPath } from '../dom.js';
import { api, enc } from '../api.js';
import { headers, relatedTable } from './message.js';

export async function exchangePage({ params, main, signal }) {
  const [sid, xid] = params;
  const d = await api('/exchanges/' + enc(xid), { signal });
  const x = d.exchange;
  const s = x.session || sid;
  document.title = `Exchange #${x.id} · mcptape`;
  main.append(h('nav', { class: 'crumbs' }, h('a', { href: sessionPath(s) }, '← session ', h('span', { class: 'mono' }, clipped(s, 60)))),
    h('h1', {}, `Exchange #${x.id} `, h('code', {}, x.method, ' ', clipped(x.url, 200)), ` → ${x.status || 'no response'}`));
  if ((x.findings || []).length) {
    main.append(section(`Findings of the exchange (${x.findings.length})`, h('ul', { class: 'findings' }, x.findings.map((f) => h('li', {}, chip(f.kind, 'finding'), ' ', clipped(f.message, 1000))))));
  }
  main.append(section(`Messages (${fmtCount(d.messages.length)}${d.more ? '+' : ''})`,
    d.messages.length ? relatedTable(s, d.messages, d.more ? 1 : 0, 'exchange-messages') : h('p', { class: 'muted' }, 'No messages: the exchange carried no JSON-RPC.')));
  main.append(headers(x));
}
