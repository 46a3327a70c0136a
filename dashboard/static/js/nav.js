// Navigation and the status line. Pages import this module, never app.js:
// app.js loads the pages, and registers here what navigating does.

const hooks = { render: null, leave: null };

// setRouter is app.js's: render draws the page at the current address;
// leave runs before the address changes (it keeps what the page showed,
// for Back).
export function setRouter({ render, leave }) {
  hooks.render = render;
  hooks.leave = leave;
}

// navigate goes to url; notice is a [text, kind] status to show once the
// page has rendered (rendering clears the status line first). replace
// swaps the current entry of the history instead of adding one.
export function navigate(url, { replace = false, notice = null } = {}) {
  if (!replace && hooks.leave) hooks.leave();
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  if (hooks.render) hooks.render(notice);
}

// status shows a short message in the header.
export function status(text, kind = '') {
  const el = document.getElementById('status');
  if (!el) return;
  el.textContent = text;
  el.className = 'status ' + kind;
}

// The keys of the page on screen, for the ? help: [key, what it does].
let keys = [];

// setKeys lists the current page's keys (the router clears them when the
// page changes).
export function setKeys(list) { keys = list; }

export function pageKeys() { return keys; }
