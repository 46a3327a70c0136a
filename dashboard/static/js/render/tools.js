// tools/call: the arguments as a key/value view beside the tool's
// inputSchema (types, required, descriptions, defaults), and the result by
// its shape: content blocks (markdown, media, resource links with their
// annotations; text that is JSON as a table or key/value view),
// structuredContent beside content, isError results as errors.

import { h, chip, clipped, fmtCount } from '../dom.js';
import { compact, objTable } from '../view.js';
import { contentBlocks, contentBlock, isObj, isBlock, metaFold, value } from './content.js';
import { fields, describe, schemaTable } from './schema.js';

// toolArguments draws a call's arguments against the tool's schema (tool
// as the session's tools/list described it, or null).
export function toolArguments(name, args, tool) {
  const out = h('div', { class: 'tool-call-view' });
  out.append(h('div', { class: 'tool-head' }, h('span', { class: 'muted' }, 'Tool '), h('code', { class: 'tool-name' }, clipped(typeof name === 'string' ? name : '?', 200)),
    tool && typeof tool.description === 'string' ? h('span', { class: 'muted tool-description' }, ' — ', clipped(tool.description, 1000)) : ''));
  const a = isObj(args) ? args : {};
  const schema = tool && isObj(tool.inputSchema) ? tool.inputSchema : null;
  const fs = schema ? fields(schema) : [];
  const names = [...fs.map((f) => f.name), ...Object.keys(a).filter((k) => !fs.some((f) => f.name === k))];
  if (args !== undefined && !isObj(args)) out.append(h('p', { class: 'bad' }, 'The arguments are not an object: '), value(args, 1));
  if (names.length === 0) {
    out.append(h('p', { class: 'muted' }, 'No arguments.'));
  } else {
    out.append(h('table', { class: 'grid arguments' },
      h('thead', {}, h('tr', {}, ['Argument', 'Value', schema ? 'Schema' : '', schema ? 'Description' : ''].filter(Boolean).map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, names.map((k) => {
        const f = fs.find((x) => x.name === k);
        const given = k in a;
        return h('tr', { 'data-arg': k, class: given ? '' : 'absent' },
          h('th', { scope: 'row' }, h('code', {}, clipped(k, 100))),
          h('td', {}, given ? value(a[k], 2) : h('span', { class: 'muted' }, f && f.hasDefault ? `absent (default ${compact(f.default, 100)})` : 'absent'),
            given ? '' : f && f.required ? [' ', chip('missing', 'bad')] : ''),
          schema ? h('td', {}, f ? describe(f) : chip('not in the schema', 'warn')) : '',
          schema ? h('td', {}, f && f.description ? clipped(f.description, 2000) : '') : '');
      }))));
  }
  if (!tool) out.append(h('p', { class: 'muted small' }, 'The session recorded no tools/list that describes this tool, so its schema is not shown.'));
  else out.append(h('p', { class: 'muted small' }, 'Schema from the tools/list answer ', tool.href ? h('a', { href: tool.href, class: 'tools-list-link' }, `#${tool.from}`) : `#${tool.from}`, '.'));
  return out;
}

// toolResult draws a CallToolResult. tool gives the outputSchema.
export function toolResult(result, tool) {
  const r = isObj(result) ? result : {};
  const out = h('div', { class: 'tool-result' + (r.isError === true ? ' is-error' : '') });
  if (r.isError === true) {
    out.append(h('div', { class: 'error-head' }, h('span', { class: 'error-label' }, 'The tool failed'), ' ', h('span', { class: 'muted' }, '(isError: true; the call itself succeeded)')));
  }
  const hasContent = r.content !== undefined;
  const hasStructured = r.structuredContent !== undefined;
  const content = hasContent ? resultContent(r.content) : h('p', { class: 'muted' }, '(no content)');
  if (hasStructured) {
    const structured = h('div', { class: 'structured-content' }, h('h3', {}, 'structuredContent'), value(r.structuredContent, 1),
      tool && tool.outputSchema ? h('details', { class: 'output-schema' }, h('summary', {}, 'outputSchema'), schemaTable(tool.outputSchema)) : '');
    out.append(h('div', { class: 'two result-two' }, h('div', {}, h('h3', {}, 'content'), content), structured));
  } else {
    out.append(content);
  }
  const known = new Set(['content', 'structuredContent', 'isError', '_meta']);
  const rest = Object.entries(r).filter(([k]) => !known.has(k));
  if (rest.length) out.append(h('div', { class: 'other' }, rest.map(([k, v]) => h('div', {}, h('span', { class: 'muted small' }, k + ' '), value(v, 2)))));
  if (isObj(r._meta)) out.append(metaFold(r._meta));
  return out;
}

// resultContent is a tool result's content by shape: a text block that
// holds JSON (a list of records, an object) becomes a table or a
// key/value view, with its text one click away; others draw as blocks.
function resultContent(c) {
  const list = Array.isArray(c) ? c : [c];
  if (!list.every(isBlock)) return value(c, 1);
  const out = h('div', { class: 'blocks' });
  for (const b of list.slice(0, 200)) {
    const parsed = b.type === 'text' && typeof b.text === 'string' && b.text.length < (1 << 20) ? jsonOf(b.text) : undefined;
    if (parsed !== undefined && (isObj(parsed) || (Array.isArray(parsed) && parsed.length && parsed.every(isObj)))) {
      const view = Array.isArray(parsed) ? objTable(parsed) : value(parsed, 1);
      const el = contentBlock(b);
      // Replace the text with its shape, keeping the text as a fold.
      const text = el.lastChild;
      text.remove();
      el.querySelector('.block-head').append(' ', chip(Array.isArray(parsed) ? `JSON: ${fmtCount(parsed.length)} rows` : 'JSON object', 'shape'));
      el.append(view, h('details', { class: 'as-text' }, h('summary', {}, 'as text'), text));
      out.append(el);
    } else {
      out.append(contentBlock(b));
    }
  }
  if (list.length > 200) out.append(h('p', { class: 'muted' }, `… and ${fmtCount(list.length - 200)} more blocks`));
  return out;
}

function jsonOf(text) {
  const t = text.trim();
  if (!(t.startsWith('{') || t.startsWith('['))) return undefined;
  try { return JSON.parse(t); } catch { return undefined; }
}

// toolsList draws a tools/list result: each tool with its description and
// parameters.
export function toolsList(result) {
  const r = isObj(result) ? result : {};
  const tools = Array.isArray(r.tools) ? r.tools : [];
  const out = h('div', { class: 'tools-list' }, h('h3', {}, `Tools (${fmtCount(tools.length)})`));
  for (const t of tools.slice(0, 500)) {
    const o = isObj(t) ? t : {};
    out.append(h('details', { class: 'tool-def', 'data-tool': typeof o.name === 'string' ? o.name : '' },
      h('summary', {}, h('code', {}, clipped(typeof o.name === 'string' ? o.name : '?', 200)),
        typeof o.description === 'string' ? h('span', { class: 'muted' }, ' — ', clipped(o.description, 300)) : ''),
      schemaTable(o.inputSchema, { caption: 'inputSchema' }),
      o.outputSchema !== undefined ? schemaTable(o.outputSchema, { caption: 'outputSchema' }) : '',
      o.annotations !== undefined ? h('div', {}, h('span', { class: 'muted small' }, 'annotations '), value(o.annotations, 2)) : ''));
  }
  if (tools.length > 500) out.append(h('p', { class: 'muted' }, `… and ${fmtCount(tools.length - 500)} more (see the raw JSON)`));
  if (typeof r.nextCursor === 'string') out.append(h('p', { class: 'muted' }, 'More on the next page (nextCursor ', h('code', {}, clipped(r.nextCursor, 100)), ').'));
  return out;
}
