// The live tail: one EventSource (GET /api/v1/live) for the whole app.
// Pages and the nav's counts subscribe to its events by type (message,
// session, lagged, pending, intercept) with onTail, which returns the
// function that unsubscribes; 'state' tells subscribers whether the
// connection is live ('live', 'reconnecting'). The connection opens with
// the first subscriber and stays open while the app runs, so that moving
// between pages loses no event (the server also replays what a
// reconnecting browser missed).

const subs = new Map(); // type → Set of functions
const attached = new Set();
let es = null;
let state = 'connecting';

function emit(type, data) {
  const set = subs.get(type);
  if (!set) return;
  for (const fn of [...set]) {
    try { fn(data); } catch { /* one page's handler must not stop the others */ }
  }
}

function attach(type) {
  if (!es || attached.has(type) || type === 'state') return;
  attached.add(type);
  es.addEventListener(type, (ev) => {
    let d;
    try { d = JSON.parse(ev.data); } catch { return; }
    emit(type, d);
  });
}

function connect() {
  if (es) return;
  es = new EventSource('/api/v1/live');
  es.addEventListener('open', () => { state = 'live'; emit('state', state); });
  es.addEventListener('error', () => { state = 'reconnecting'; emit('state', state); });
  for (const type of subs.keys()) attach(type);
}

// onTail calls fn with the data of every event of type; it returns the
// function that stops it. fn for 'state' is called at once with the
// connection's state.
export function onTail(type, fn) {
  if (!subs.has(type)) subs.set(type, new Set());
  subs.get(type).add(fn);
  connect();
  attach(type);
  if (type === 'state') fn(state);
  return () => { subs.get(type).delete(fn); };
}
