// A JSON-RPC error, shown as an error: its code with the name the
// protocol gives it, its message, and its data.

import { h, clipped } from '../dom.js';
import { isObj, value } from './content.js';

const CODES = {
  '-32700': 'parse error', '-32600': 'invalid request', '-32601': 'method not found', '-32602': 'invalid params',
  '-32603': 'internal error', '-32002': 'resource not found', '-32042': 'URL elicitation required',
  '-32020': 'header mismatch', '-32021': 'missing required client capabilities', '-32022': 'unsupported protocol version',
  '-1': 'refused by the user',
};

export function rpcError(err) {
  const e = isObj(err) ? err : {};
  const code = typeof e.code === 'number' ? e.code : null;
  const name = code !== null ? CODES[String(code)] : '';
  return h('div', { class: 'rpc-error', role: 'group', 'aria-label': 'JSON-RPC error' },
    h('div', { class: 'error-head' }, h('span', { class: 'error-label' }, 'JSON-RPC error'),
      code !== null ? [' ', h('code', { class: 'error-code' }, String(code))] : ' (no code)',
      name ? h('span', { class: 'muted' }, ` ${name}`) : ''),
    h('div', { class: 'error-message' }, typeof e.message === 'string' ? clipped(e.message, 5000) : h('span', { class: 'muted' }, '(no message)')),
    'data' in e ? h('div', { class: 'error-data' }, h('div', { class: 'muted small' }, 'data'), value(e.data, 1)) : '');
}
