/* Console: constants, the page state, DOM helpers and formatting shared by every page. */

export const BASE = '/console';
export const UUID = '([0-9a-fA-F-]{36})';
export const state = { me: null, csrf: '', timers: [], seq: 0 };

// ---------------------------------------------------------------- DOM helpers
export function h(tag, attrs) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  appendKids(el, Array.prototype.slice.call(arguments, 2));
  return el;
}
export const SVGNS = 'http://www.w3.org/2000/svg';
export function s(tag, attrs) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  appendKids(el, Array.prototype.slice.call(arguments, 2));
  return el;
}
export function setAttrs(el, attrs) {
  for (const k in attrs || {}) {
    const v = attrs[k];
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled') el[k] = v;
    else if (k === 'style') {
      // Through CSSOM: the Content-Security-Policy forbids style attributes.
      for (const decl of String(v).split(';')) {
        const i = decl.indexOf(':');
        if (i > 0) el.style.setProperty(decl.slice(0, i).trim(), decl.slice(i + 1).trim());
      }
    } else el.setAttribute(k, v === true ? '' : String(v));
  }
}
export function appendKids(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    el.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
  }
}
export function replace(el) {
  el.replaceChildren();
  appendKids(el, Array.prototype.slice.call(arguments, 1));
  return el;
}

// ---------------------------------------------------------------- formatting
// Vietnamese money format: 1.250.000 ₫ (dot thousands separator, dong sign after the amount).
export const vndFmt = new Intl.NumberFormat('vi-VN', { style: 'currency', currency: 'VND', maximumFractionDigits: 0 });
export const numFmt = new Intl.NumberFormat('vi-VN', { maximumFractionDigits: 2 });
export const vnd = (n) => vndFmt.format(n);
export const num = (n) => numFmt.format(n);
export const pad = (n) => String(n).padStart(2, '0');
export function ymd(d) {
  return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate());
}
export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return ymd(d) + ' ' + pad(d.getHours()) + ':' + pad(d.getMinutes());
}
export function ago(iso) {
  if (!iso) return 'never';
  const sec = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (sec < 60) return 'just now';
  if (sec < 3600) return Math.floor(sec / 60) + ' min ago';
  if (sec < 86400) return Math.floor(sec / 3600) + ' h ago';
  return when(iso);
}
export const short = (id) => String(id).slice(0, 8);
export const UNIT_LABELS = {
  input_tokens: 'input tokens',
  output_tokens: 'output tokens',
  prompt_tokens: 'prompt tokens',
  completion_tokens: 'completion tokens',
  total_tokens: 'tokens',
  characters: 'characters',
  chars: 'characters',
  seconds: 'seconds',
  audio_seconds: 'audio seconds',
  minutes: 'minutes',
  images: 'images',
  duration_seconds: 'seconds',
  input_uncached_tokens: 'uncached input tokens',
  cache_read_tokens: 'cache-read tokens',
  cache_write_5m_tokens: 'cache-write (5 min) tokens',
  cache_write_1h_tokens: 'cache-write (1 h) tokens',
  reasoning_tokens: 'reasoning tokens',
};
export function unitsText(units) {
  const keys = Object.keys(units || {}).filter((k) => k !== 'total_tokens' || Object.keys(units).length === 1);
  if (!keys.length) return '—';
  return keys.map((k) => num(units[k]) + ' ' + (UNIT_LABELS[k] || k.replace(/_/g, ' '))).join(' · ');
}
