// held.js: what the two hold-and-answer pages share (/intercept, the
// messages a recorder holds; /pending, the requests a replay client waits
// on a person for): a list of cards kept in step with the server's list,
// and the answer that goes back for one of them.

import { h } from './dom.js';
import { api, enc } from './api.js';
import { status } from './nav.js';

// syncCards makes list show one card per item of items (matched by id):
// cards whose item is gone are removed, new items get a card from
// make(item, age, gone), which returns the card's entry ({el, since, …});
// age is the element make puts the card's age in, and gone removes the
// card (once it is answered). empty shows when no card is left.
export function syncCards(cards, list, empty, items, make) {
  const ids = new Set(items.map((it) => it.id));
  for (const [id, c] of cards) {
    if (!ids.has(id)) {
      c.el.remove();
      cards.delete(id);
    }
  }
  for (const it of items) {
    if (cards.has(it.id)) continue;
    const age = h('span', { class: 'muted age' });
    const gone = () => {
      const c = cards.get(it.id);
      if (c) c.el.remove();
      cards.delete(it.id);
      empty.hidden = cards.size > 0;
    };
    const c = make(it, age, gone);
    cards.set(it.id, c);
    list.append(c.el);
  }
  empty.hidden = cards.size > 0;
}

// answerer returns send(body, what): it POSTs body to base + id with
// buttons disabled meanwhile, and on success says what was done and calls
// gone; a failure shows in check, and a 404 (answered elsewhere, or no
// longer waiting) removes the card after 3 s.
export function answerer(base, id, buttons, check, gone) {
  return async (body, what) => {
    for (const b of buttons) b.disabled = true;
    try {
      await api(base + enc(id), { method: 'POST', body });
      status(what, 'ok');
      gone();
    } catch (e) {
      check.textContent = e.message;
      check.className = 'check bad';
      if (e.status === 404) setTimeout(gone, 3000);
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
}
