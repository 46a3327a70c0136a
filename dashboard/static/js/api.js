// The dashboard's JSON API (/api/v1). Requests that change anything carry
// the CSRF token from the mcptape_csrf cookie in the X-CSRF-Token header.

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
  const res = await fetch('/api/v1' + path, opts);
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
