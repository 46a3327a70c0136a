// The recording banner, in the shared layout: it polls /api/v1/status and
// says when recording is paused (the disk is short of space, or the store
// is at its size bound) or has lost messages; under the footer, the
// store's size on disk and how long sessions are kept. Traffic flows either way;
// the banner says what is not being kept. Text only: the reason quotes a
// directory, which may hold anything.

import { api } from './api.js';

const every = 5000;

function fmtBytes(n) {
  if (!(n >= 0)) return '';
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(1)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${Math.round(n / 2 ** 10)} KiB`;
}

// ageText is a retention age in seconds as people say it: 30 days, 12 h.
function ageText(sec) {
  if (sec % 86400 === 0) return `${sec / 86400} day${sec === 86400 ? '' : 's'}`;
  if (sec % 3600 === 0) return `${sec / 3600} h`;
  return `${Math.round(sec / 60)} min`;
}

// storeText is the store's size on disk and what retention keeps.
function storeText(st) {
  if (!(st.size > 0)) return '';
  let text = `Store: ${fmtBytes(st.size)} on disk`;
  if (st.maxSize > 0) text += ` of at most ${fmtBytes(st.maxSize)}`;
  text += st.maxAgeSeconds > 0 ? ` · sessions kept ${ageText(st.maxAgeSeconds)} after their last traffic` : ' · sessions kept whatever their age';
  if (st.pruned > 0) text += ` · ${st.pruned} old session(s) deleted since start`;
  return text;
}

// sentence makes the store's reason read as one.
function sentence(s) {
  s = s.trim();
  if (!s) return s;
  s = s[0].toUpperCase() + s.slice(1);
  return /[.!?]$/.test(s) ? s : s + '.';
}

export function watchStatus() {
  const el = document.getElementById('banner');
  if (!el) return;
  const show = (st) => {
    let text = '';
    if (st.paused) {
      text = `${sentence(st.reason || 'Recording is paused.')} ${st.lost} message(s) not recorded so far.`;
      if (st.free >= 0) text += ` ${fmtBytes(st.free)} free.`;
    } else if (st.lost > 0) {
      text = `${st.lost} message(s) were not recorded (the store refused or could not keep up); the sessions that lost them are marked incomplete. Recording goes on.`;
    }
    el.textContent = text;
    el.hidden = !text;
    el.dataset.state = st.paused ? 'paused' : (st.lost > 0 ? 'lost' : 'ok');
    const store = document.getElementById('store-size');
    if (store) {
      store.textContent = storeText(st);
      store.hidden = !store.textContent;
    }
  };
  // A poll that reaches nobody: the process behind the page has ended.
  const gone = (e) => {
    if (e.code !== 'stopped') return;
    el.textContent = `${e.message} (noticed at ${new Date().toLocaleTimeString()})`;
    el.hidden = false;
    el.dataset.state = 'stopped';
  };
  const poll = () => api('/status').then(show).catch(gone).finally(() => setTimeout(poll, every));
  poll();
}
