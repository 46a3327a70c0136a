// sampling/createMessage: the request (messages by role, system prompt,
// model preferences, limits, tools offered, tool choice) and its answer
// (content, model, stop reason, the tool calls the model requested).
// The message page, the Pending page and the tree's previews all draw
// sampling with these.

import { h, chip, clipped, fmtCount, kv } from '../dom.js';
import { textView, compact } from '../view.js';
import { contentBlocks, isObj, toolCallText, metaFold, value } from './content.js';
import { schemaTable } from './schema.js';

const MAX_MESSAGES = 500;

// samplingRequest draws CreateMessageRequest params. compact draws the
// messages and the first lines only (the tree's preview).
export function samplingRequest(params, { compact: small = false } = {}) {
  const p = isObj(params) ? params : {};
  const out = h('div', { class: 'sampling sampling-request' + (small ? ' small' : '') });
  if (typeof p.systemPrompt === 'string') {
    out.append(h('h3', {}, 'System prompt'), h('div', { class: 'system-prompt' }, textView(p.systemPrompt)));
  }
  const messages = Array.isArray(p.messages) ? p.messages : [];
  out.append(h('h3', {}, `Messages (${fmtCount(messages.length)})`), samplingMessages(messages));
  if (small) return out;
  const facts = [];
  if ('maxTokens' in p) facts.push(['Max tokens', value(p.maxTokens, 2)]);
  if ('temperature' in p) facts.push(['Temperature', value(p.temperature, 2)]);
  if (Array.isArray(p.stopSequences)) facts.push(['Stop sequences', p.stopSequences.length ? p.stopSequences.map((s, i) => [i ? ' ' : '', h('code', {}, clipped(compact(s, 200), 200))]) : h('span', { class: 'muted' }, 'none')]);
  if ('includeContext' in p) facts.push(['Include context', value(p.includeContext, 2)]);
  if (isObj(p.modelPreferences)) facts.push(['Model preferences', modelPreferences(p.modelPreferences)]);
  if ('toolChoice' in p) facts.push(['Tool choice', toolChoice(p.toolChoice)]);
  if ('metadata' in p) facts.push(['Metadata', value(p.metadata, 2)]);
  if (facts.length) out.append(h('h3', {}, 'Parameters'), h('div', { class: 'sampling-facts' }, kv(facts)));
  if (Array.isArray(p.tools)) out.append(h('h3', {}, `Tools offered (${fmtCount(p.tools.length)})`), toolsOffered(p.tools));
  const known = new Set(['systemPrompt', 'messages', 'maxTokens', 'temperature', 'stopSequences', 'includeContext', 'modelPreferences', 'toolChoice', 'metadata', 'tools', '_meta']);
  const rest = Object.entries(p).filter(([k]) => !known.has(k));
  if (rest.length) out.append(h('h3', {}, 'Other parameters'), kv(rest.map(([k, v]) => [k, value(v, 1)])));
  if (isObj(p._meta)) out.append(metaFold(p._meta));
  return out;
}

// samplingMessages draws the conversation: each message a row with its
// role in a column of its own and its content blocks beside it.
export function samplingMessages(messages) {
  const ol = h('ol', { class: 'messages' });
  for (const m of messages.slice(0, MAX_MESSAGES)) {
    const role = isObj(m) && typeof m.role === 'string' ? m.role : '?';
    ol.append(h('li', { class: 'message role-' + role.replace(/[^a-z]/g, '') },
      h('span', { class: 'role' }, clipped(role, 20)),
      h('div', { class: 'message-content' }, contentBlocks(isObj(m) ? m.content : m))));
  }
  if (messages.length > MAX_MESSAGES) ol.append(h('li', { class: 'muted' }, `… and ${fmtCount(messages.length - MAX_MESSAGES)} more messages (see the raw JSON)`));
  return ol;
}

function modelPreferences(mp) {
  const rows = [];
  if (Array.isArray(mp.hints)) {
    rows.push(['Hints', mp.hints.length ? h('span', { class: 'hints' }, mp.hints.map((x) =>
      chip(isObj(x) && typeof x.name === 'string' ? x.name : compact(x, 60), 'hint'))) : h('span', { class: 'muted' }, 'none')]);
  }
  for (const [k, label] of [['costPriority', 'Cost priority'], ['speedPriority', 'Speed priority'], ['intelligencePriority', 'Intelligence priority']]) {
    if (k in mp) rows.push([label, priority(mp[k])]);
  }
  for (const [k, v] of Object.entries(mp)) {
    if (!['hints', 'costPriority', 'speedPriority', 'intelligencePriority'].includes(k)) rows.push([k, value(v, 2)]);
  }
  return kv(rows);
}

// priority is a 0–1 priority as a number and a small bar.
function priority(v) {
  if (typeof v !== 'number') return value(v, 2);
  const pct = Math.max(0, Math.min(1, v)) * 100;
  return h('span', { class: 'priority' }, h('meter', { min: '0', max: '1', value: String(Math.max(0, Math.min(1, v))), 'aria-label': 'priority' }),
    ` ${v}`, pct !== v * 100 ? h('span', { class: 'warn' }, ' (outside 0–1)') : '');
}

function toolChoice(tc) {
  if (isObj(tc) && typeof tc.mode === 'string') {
    return [h('code', {}, clipped(tc.mode, 40)), typeof tc.name === 'string' ? [' ', h('code', {}, clipped(tc.name, 100))] : ''];
  }
  return value(tc, 2);
}

// toolsOffered lists tools with their descriptions and parameters.
export function toolsOffered(tools) {
  const ul = h('ul', { class: 'tools-offered' });
  for (const t of tools.slice(0, 200)) {
    const o = isObj(t) ? t : {};
    const li = h('li', { class: 'tool-offered' },
      h('div', {}, h('code', { class: 'tool-name' }, clipped(typeof o.name === 'string' ? o.name : '?', 200)),
        typeof o.description === 'string' ? [' — ', clipped(o.description, 2000)] : ''));
    if (o.inputSchema !== undefined) li.append(schemaTable(o.inputSchema));
    ul.append(li);
  }
  if (tools.length > 200) ul.append(h('li', { class: 'muted' }, `… and ${tools.length - 200} more`));
  return ul;
}

// toolUses are the tool_use blocks of a content member.
export function toolUses(content) {
  const list = Array.isArray(content) ? content : [content];
  return list.filter((b) => isObj(b) && b.type === 'tool_use');
}

// samplingResult draws a CreateMessageResult: the tool calls it requests
// as one line each, the content, model and stop reason.
export function samplingResult(result, { compact: small = false } = {}) {
  const r = isObj(result) ? result : {};
  const out = h('div', { class: 'sampling sampling-result' + (small ? ' small' : '') });
  out.append(h('div', { class: 'result-facts' }, kv([
    ['Model', typeof r.model === 'string' ? h('code', {}, clipped(r.model, 200)) : h('span', { class: 'muted' }, '(none)')],
    ['Stop reason', typeof r.stopReason === 'string' ? chip(r.stopReason, r.stopReason === 'toolUse' ? 'warn' : '') : h('span', { class: 'muted' }, '(none)')],
    typeof r.role === 'string' ? ['Role', r.role] : null,
  ])));
  const uses = toolUses(r.content);
  if (uses.length) {
    out.append(h('h3', {}, `Tool calls requested (${uses.length})`),
      h('ul', { class: 'tool-calls' }, uses.map((u) => h('li', {}, h('code', { class: 'tool-call' }, clipped(toolCallText(u.name, u.input, 5000), 5000))))));
  }
  out.append(h('h3', {}, 'Content'), contentBlocks(r.content));
  if (!small && isObj(r._meta)) out.append(metaFold(r._meta));
  return out;
}
