// messageBody picks the view of a JSON-RPC message by what it is: a
// sampling or elicitation request with its answer, a tool call against its
// schema, a tool result by shape, a JSON-RPC error as an error, an MRTR
// input_required result as its input requests; anything else by its
// shape. The message page and the input-request page use it.

import { h, chip, clipped, fmtCount } from '../dom.js';
import { parse } from '../view.js';
import { isObj, metaFold, value } from './content.js';
import { samplingRequest, samplingResult } from './sampling.js';
import { elicitationRequest, elicitationAnswer } from './elicitation.js';
import { toolArguments, toolResult, toolsList } from './tools.js';
import { rpcError } from './errors.js';

const SAMPLING = 'sampling/createMessage';
const ELICIT = 'elicitation/create';

// requestView draws a request's params by method. answer is the parsed
// result that answered it (sampling, elicitation, roots), if known.
export function requestView(method, params, { answer, tool, links = {} } = {}) {
  switch (method) {
    case SAMPLING: {
      const el = samplingRequest(params);
      if (isObj(answer)) el.append(h('section', { class: 'answer' }, h('h3', {}, 'Answer'), samplingResult(answer)));
      return el;
    }
    case ELICIT:
      return elicitationRequest(params, { answer, links });
    case 'tools/call':
      return h('div', {}, toolArguments(isObj(params) ? params.name : '', isObj(params) ? params.arguments : undefined, tool), restOf(params, ['name', 'arguments', '_meta']));
    case 'roots/list':
      return h('div', {}, value(params === undefined ? {} : params, 0), isObj(answer) ? h('section', { class: 'answer' }, h('h3', {}, 'Answer'), rootsView(answer)) : '');
  }
  if (params === undefined) return h('p', { class: 'muted' }, 'No params.');
  return h('div', {}, value(withoutMeta(params), 0), isObj(params) && isObj(params._meta) ? metaFold(params._meta) : '');
}

// resultView draws a result by the method of its request.
export function resultView(method, result, { request, tool, inputs = [], inputHref } = {}) {
  const r = isObj(result) ? result : {};
  if (r.resultType === 'input_required') return inputRequired(r, inputs, inputHref);
  switch (method) {
    case SAMPLING:
      return samplingResult(result);
    case ELICIT:
      return elicitationAnswer(result, isObj(request) ? request.params : null);
    case 'tools/call':
      return toolResult(result, tool);
    case 'tools/list':
      return toolsList(result);
    case 'roots/list':
      return rootsView(result);
  }
  return h('div', {}, value(withoutMeta(result), 0), isObj(r._meta) ? metaFold(r._meta) : '');
}

// messageBody draws a parsed JSON-RPC message. o: {kind, method, request
// (parsed request message), answer (parsed response message), tool, inputs,
// inputHref, links}.
export function messageBody(msg, o = {}) {
  if (!isObj(msg)) return value(msg, 0);
  if ('error' in msg) return h('div', { class: 'structured' }, rpcError(msg.error));
  if ('result' in msg) return h('div', { class: 'structured' }, resultView(o.method, msg.result, o));
  if ('method' in msg) {
    const answer = isObj(o.answer) && isObj(o.answer.result) ? o.answer.result : undefined;
    const answerError = isObj(o.answer) && 'error' in o.answer ? o.answer.error : undefined;
    const el = h('div', { class: 'structured' }, requestView(msg.method, msg.params, { answer, tool: o.tool, links: o.links }));
    if (answerError !== undefined) el.append(h('section', { class: 'answer' }, h('h3', {}, 'Answer'), rpcError(answerError)));
    return el;
  }
  return h('div', { class: 'structured' }, value(msg, 0));
}

function withoutMeta(v) {
  if (!isObj(v) || !('_meta' in v)) return v;
  const { _meta, ...rest } = v;
  return rest;
}

function restOf(params, known) {
  if (!isObj(params)) return '';
  const rest = Object.entries(params).filter(([k]) => !known.includes(k));
  const out = h('div', {});
  if (rest.length) out.append(h('h3', {}, 'Other params'), value(Object.fromEntries(rest), 1));
  if (isObj(params._meta)) out.append(metaFold(params._meta));
  return out;
}

function rootsView(result) {
  const roots = isObj(result) && Array.isArray(result.roots) ? result.roots : [];
  if (!roots.length) return h('p', { class: 'muted' }, 'No roots.');
  return h('ul', { class: 'roots' }, roots.slice(0, 500).map((r) => h('li', {},
    h('code', {}, clipped(isObj(r) && typeof r.uri === 'string' ? r.uri : '?', 500)),
    isObj(r) && typeof r.name === 'string' ? [' ', h('span', { class: 'muted' }, clipped(r.name, 200))] : '')));
}

// inputRequired draws an MRTR input_required result: each input request
// (a message of its own, with a link) and the request state.
function inputRequired(r, inputs, inputHref) {
  const reqs = isObj(r.inputRequests) ? r.inputRequests : {};
  const keys = Object.keys(reqs).sort();
  const out = h('div', { class: 'input-required' },
    h('p', {}, chip('input_required', 'status-input_required'), ` The server needs ${fmtCount(keys.length)} answer(s) from the client before it finishes; the client answers in its retry.`));
  const ul = h('ul', { class: 'inputs' });
  for (const k of keys.slice(0, 200)) {
    const q = isObj(reqs[k]) ? reqs[k] : {};
    const method = typeof q.method === 'string' ? q.method : '?';
    const ref = inputs.find((x) => x.key === k);
    ul.append(h('li', { 'data-key': k },
      inputHref ? h('a', { href: inputHref(k), class: 'input-link' }, h('code', {}, clipped(k, 100))) : h('code', {}, clipped(k, 100)),
      ' ', h('span', { class: 'method' }, clipped(method, 100)),
      ref && ref.answered ? h('span', { class: 'muted' }, ' · answered in the retry') : h('span', { class: 'muted' }, ' · not answered in this recording'),
      h('div', { class: 'input-preview' }, method === SAMPLING ? samplingRequest(q.params, { compact: true }) :
        method === ELICIT ? elicitationRequest(q.params, { compact: true }) : value(q.params === undefined ? {} : q.params, 2))));
  }
  out.append(ul);
  if (r.requestState !== undefined) out.append(h('div', { class: 'muted small' }, 'requestState ', h('code', {}, clipped(typeof r.requestState === 'string' ? r.requestState : JSON.stringify(r.requestState), 300))));
  if (isObj(r._meta)) out.append(metaFold(r._meta));
  return out;
}

export { parse };
