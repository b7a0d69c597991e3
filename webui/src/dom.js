// A tiny element builder: h('button', {onclick}, 'text'). Text is always set
// as text, never as HTML, so nothing from a document can run as markup.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

let seq = 0;
export const uid = (p) => `${p}-${++seq}`;

// A labelled control: <label for=id>text</label><control id=id>.
export function field(text, control, hint) {
  control.id ||= uid('f');
  const parts = [h('label', { for: control.id }, text), control];
  if (hint) {
    const hid = uid('hint');
    control.setAttribute('aria-describedby', hid);
    parts.push(h('small', { id: hid, class: 'muted' }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

export function toast(text, bad = false) {
  const t = document.getElementById('toast');
  t.textContent = text;
  t.className = bad ? 'bad show' : 'show';
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.className = ''; }, 4000);
}

export const fmtTime = (s) => (s === null || s === undefined ? '–' : s < 60 ? `${s.toFixed(0)} s` : `${(s / 60).toFixed(1)} min`);

export function locLabel(loc) {
  if (!loc) return '';
  const parts = [];
  if (loc.page_start) {
    const unit = { page: 'p. ', slide: 'slide ', sheet: 'sheet ' }[loc.unit || 'page'];
    parts.push(unit + loc.page_start + (loc.page_end && loc.page_end !== loc.page_start ? `–${loc.page_end}` : ''));
  }
  if (loc.section) parts.push(`§${loc.section}`);
  return parts.join(', ');
}
