// MCP content blocks (text, image, audio, resource, resource_link,
// tool_use, tool_result), each drawn as one flat block: a head line with
// its type and what identifies it, then its body. Blocks inside a
// tool_result are drawn inline, without boxes of their own.

import { h, add, chip, clipped, fmtCount } from '../dom.js';
import { textView, mediaURL, compact, jsonTree, objTable, scalar } from '../view.js';

export const BLOCK_TYPES = new Set(['text', 'image', 'audio', 'resource', 'resource_link', 'tool_use', 'tool_result']);

export function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }

export function isBlock(v) {
  return isObj(v) && typeof v.type === 'string' && BLOCK_TYPES.has(v.type);
}

const MAX_BLOCKS = 200;

// contentBlocks draws a content member: one block or a list of them.
export function contentBlocks(c, { inner = false } = {}) {
  if (c === undefined) return h('span', { class: 'muted' }, '(no content)');
  if (typeof c === 'string') return textView(c);
  const list = Array.isArray(c) ? c : [c];
  if (list.length === 0) return h('span', { class: 'muted' }, '(empty content)');
  const out = h('div', { class: inner ? 'blocks inner' : 'blocks' });
  for (const b of list.slice(0, MAX_BLOCKS)) out.append(isBlock(b) ? contentBlock(b, { inner }) : value(b, 1));
  if (list.length > MAX_BLOCKS) out.append(h('p', { class: 'muted' }, `… and ${fmtCount(list.length - MAX_BLOCKS)} more blocks (see the raw JSON)`));
  return out;
}

// toolCallText is a tool call as one line: get_weather({"city":"Paris"}).
export function toolCallText(name, input, max = 300) {
  const n = typeof name === 'string' ? name : '?';
  return `${n}(${input === undefined ? '' : compact(input, max)})`;
}

// annotations are a block's or a resource's annotations as chips.
export function annotations(a) {
  if (!isObj(a)) return '';
  const out = [];
  if (Array.isArray(a.audience)) out.push(chip('for ' + a.audience.filter((x) => typeof x === 'string').join(', '), 'annotation'));
  if (typeof a.priority === 'number') out.push(chip(`priority ${a.priority}`, 'annotation'));
  if (typeof a.lastModified === 'string') out.push(chip(`modified ${a.lastModified}`, 'annotation'));
  for (const [k, v] of Object.entries(a)) {
    if (!['audience', 'priority', 'lastModified'].includes(k)) out.push(chip(`${k}: ${compact(v, 60)}`, 'annotation'));
  }
  return out.length ? h('span', { class: 'annotations' }, out) : '';
}

// contentBlock draws one block.
export function contentBlock(b, { inner = false } = {}) {
  const head = h('div', { class: 'block-head' }, h('span', { class: 'chip block-type' }, b.type));
  const el = h('div', { class: 'block block-' + b.type + (inner ? ' inner' : '') }, head);
  switch (b.type) {
    case 'text':
      el.append(textView(typeof b.text === 'string' ? b.text : compact(b.text)));
      break;
    case 'image':
    case 'audio': {
      const url = mediaURL(b.type, b.mimeType, b.data);
      add(head, [' ', typeof b.mimeType === 'string' ? clipped(b.mimeType, 80) : '',
        typeof b.data === 'string' ? h('span', { class: 'muted' }, ` · ${fmtCount(Math.floor(b.data.length * 3 / 4))} bytes`) : '']);
      if (url && b.type === 'image') el.append(h('img', { class: 'media', src: url, alt: 'image content block' }));
      else if (url) el.append(h('audio', { class: 'media', controls: true, preload: 'none', src: url }));
      else el.append(h('p', { class: 'muted' }, `not previewed: only base64 ${b.type}/* content is shown`));
      break;
    }
    case 'resource_link': {
      // A URI is shown as text, never as a link.
      add(head, [' ', typeof b.name === 'string' ? h('strong', {}, clipped(b.name, 200)) : '',
        ' ', h('code', {}, clipped(typeof b.uri === 'string' ? b.uri : '', 300)),
        typeof b.mimeType === 'string' ? h('span', { class: 'muted' }, ' · ', clipped(b.mimeType, 80)) : '',
        typeof b.size === 'number' ? h('span', { class: 'muted' }, ` · ${fmtCount(b.size)} bytes`) : '']);
      if (typeof b.title === 'string') el.append(h('div', { class: 'title' }, clipped(b.title, 300)));
      if (typeof b.description === 'string') el.append(h('div', { class: 'description' }, clipped(b.description, 2000)));
      break;
    }
    case 'resource': {
      const r = isObj(b.resource) ? b.resource : {};
      add(head, [' ', h('code', {}, clipped(typeof r.uri === 'string' ? r.uri : '', 300)),
        typeof r.mimeType === 'string' ? h('span', { class: 'muted' }, ' · ', clipped(r.mimeType, 80)) : '']);
      if (typeof r.text === 'string') el.append(textView(r.text));
      else if (typeof r.blob === 'string') {
        const kind = String(r.mimeType || '').split('/')[0];
        const url = mediaURL(kind, r.mimeType, r.blob);
        if (url && kind === 'image') el.append(h('img', { class: 'media', src: url, alt: 'embedded resource' }));
        else if (url && kind === 'audio') el.append(h('audio', { class: 'media', controls: true, preload: 'none', src: url }));
        else el.append(h('p', { class: 'muted' }, `binary (${typeof r.mimeType === 'string' ? r.mimeType : 'unknown type'}), ${fmtCount(r.blob.length)} base64 characters`));
      }
      break;
    }
    case 'tool_use':
      // One readable line: the call, then its id.
      add(head, [' ', h('code', { class: 'tool-call' }, clipped(toolCallText(b.name, b.input, 2000), 2000)),
        typeof b.id === 'string' ? h('span', { class: 'muted' }, ' · id ', clipped(b.id, 80)) : '']);
      break;
    case 'tool_result':
      add(head, [' for ', h('code', {}, clipped(typeof b.toolUseId === 'string' ? b.toolUseId : '?', 80)),
        b.isError === true ? [' ', chip('error', 'bad')] : '']);
      if (b.content !== undefined) el.append(contentBlocks(b.content, { inner: true }));
      if (b.structuredContent !== undefined) el.append(h('div', { class: 'structured-content' }, h('span', { class: 'muted small' }, 'structuredContent'), value(b.structuredContent, 1)));
      break;
    default:
      el.append(value(b, 1));
  }
  const notes = annotations(b.annotations);
  if (notes) head.append(' ', notes);
  if (isObj(b._meta)) el.append(metaFold(b._meta));
  return el;
}

// metaFold is a _meta member folded away: a closed details element whose
// tree is built when first opened.
export function metaFold(meta, label = '_meta') {
  const d = h('details', { class: 'meta-fold' }, h('summary', {}, `${label} (${Object.keys(meta || {}).length} keys)`));
  let built = false;
  d.addEventListener('toggle', () => {
    if (!d.open || built) return;
    built = true;
    d.append(jsonTree(meta));
  });
  return d;
}

function isFlat(o) {
  return Object.values(o).every((v) => v === null || typeof v !== 'object');
}

// value renders v by its shape: content blocks, a table for a list of
// objects, key/value for an object, text for a string; below depth 4 it
// falls back to the JSON tree. It lives beside the content blocks because
// each draws the other (a block's structuredContent, a list of blocks).
export function value(v, depth = 0) {
  if (depth > 4) return jsonTree(v);
  if (v === null || typeof v !== 'object') {
    if (typeof v === 'string' && (v.includes('\n') || v.length > 120)) return textView(v);
    return scalar(v);
  }
  if (Array.isArray(v)) {
    if (v.length === 0) return h('span', { class: 'muted' }, '(empty list)');
    if (v.every(isBlock)) return contentBlocks(v);
    if (v.every(isObj)) return objTable(v);
    if (v.length > 200) return jsonTree(v);
    return h('ol', { class: 'list', start: '0' }, v.map((x) => h('li', {}, value(x, depth + 1))));
  }
  if (isBlock(v)) return contentBlock(v);
  const keys = Object.keys(v);
  if (keys.length === 0) return h('span', { class: 'muted' }, '(empty object)');
  if (keys.length > 200) return jsonTree(v);
  return h('dl', { class: 'kv' + (isFlat(v) ? ' flat' : '') }, keys.map((k) => [h('dt', {}, k), h('dd', {}, value(v[k], depth + 1))]));
}
