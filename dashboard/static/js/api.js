// The dashboard's JSON API (/api/v1). Requests that change anything carry
// the CSRF token from the mcptape_csrf cookie in the X-CSRF-Token header.

// STOPPED is what a request that reaches nobody means: the mcptape
// process that served the dashboard has ended.
export const STOPPED = 'mcptape no longer answers at this address: the recorder (or dashboard) that served this page has stopped. ' +
  'What is on screen stays readable; other pages, live updates and actions need it running again: start mcptape record (or mcptape dashboard) and reload.';

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function csrfToken() {
  for (const part of document.cookie.split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k === 'mcptape_csrf') return decodeURIComponent(v.join('='));
  }
  return '';
}

export async function api(path, { method = 'GET', body, signal } = {}) {
  const headers = { Accept: 'application/json' };
  const opts = { method, headers, signal, credentials: 'same-origin', cache: 'no-store' };
  if (method !== 'GET') headers['X-CSRF-Token'] = csrfToken();
  if (body instanceof Blob) {
    opts.body = body;
    headers['Content-Type'] = 'application/json';
  } else if (body !== undefined) {
    opts.body = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch('/api/v1' + path, opts);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, STOPPED, 'stopped');
  }
  if (res.status === 204) return null;
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (!res.ok) throw new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`, data && data.code);
  return data;
}

let infoPromise;
export function info() {
  if (!infoPromise) infoPromise = api('/info').catch((e) => { infoPromise = undefined; throw e; });
  return infoPromise;
}

export const enc = encodeURIComponent;
