// Ask: a question in a mode, the answer streamed as it is written, its [n]
// citations opening the cited passage (document, page, section) with the
// supporting sentences marked, and a Context tab with what the model was given.
import { api, lines, session, ws } from './api.js';
import { field, h, locLabel, toast } from './dom.js';
import { failed } from './main.js';

export async function askPage(main) {
  let alive = true;
  const modes = session.info.modes;
  const question = h('textarea', { name: 'question', rows: 3, required: true });
  const mode = h('select', { name: 'mode' }, modes.map((m) => h('option', { value: m.name, selected: m.name === session.info.default_mode }, m.name)));
  const modeHelp = h('small', { class: 'muted', id: 'mode-help' });
  mode.setAttribute('aria-describedby', 'mode-help');
  const describe = () => { modeHelp.textContent = modes.find((m) => m.name === mode.value)?.description || ''; };
  mode.addEventListener('change', describe);
  describe();
  const budget = h('input', { type: 'number', name: 'budget', min: 1000, max: 1000000, step: 1000, value: 30000 });
  const ask = h('button', { type: 'submit' }, 'Ask');
  const form = h('form', { class: 'card', 'aria-label': 'Ask a question' },
    field('Question', question),
    h('div', { class: 'field' }, h('label', { for: 'mode' }, 'Mode'), Object.assign(mode, { id: 'mode' }), modeHelp),
    field('Token budget', budget, 'max_total_tokens: the most the prompt may hold (entities, relations, chunks).'),
    ask);
  question.addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });

  const answer = h('div', { class: 'answer', 'aria-live': 'polite', 'aria-busy': 'false' });
  const refs = h('ol', { class: 'refs', 'aria-label': 'References' });
  const passage = h('aside', { class: 'passage', 'aria-label': 'Cited passage', hidden: true });
  const contextPane = h('div', { class: 'context' });
  const tabA = h('button', { type: 'button', role: 'tab', 'aria-selected': 'true', id: 'tab-answer' }, 'Answer');
  const tabC = h('button', { type: 'button', role: 'tab', 'aria-selected': 'false', id: 'tab-context' }, 'Context');
  const paneA = h('div', { role: 'tabpanel', 'aria-labelledby': 'tab-answer' }, answer, h('h2', {}, 'References'), refs, passage);
  const paneC = h('div', { role: 'tabpanel', 'aria-labelledby': 'tab-context', hidden: true }, contextPane);
  const select = (a) => { tabA.setAttribute('aria-selected', String(a)); tabC.setAttribute('aria-selected', String(!a)); paneA.hidden = !a; paneC.hidden = a; };
  tabA.addEventListener('click', () => select(true));
  tabC.addEventListener('click', () => select(false));

  main.append(h('h1', {}, 'Ask'), form, h('div', { role: 'tablist', class: 'tabs' }, tabA, tabC), paneA, paneC);

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!question.value.trim()) return;
    ask.disabled = true;
    answer.replaceChildren();
    refs.replaceChildren();
    contextPane.replaceChildren();
    passage.hidden = true;
    answer.setAttribute('aria-busy', 'true');
    let text = '';
    try {
      for await (const msg of lines('POST', ws('/query/stream'), { json: { question: question.value, mode: mode.value, max_total_tokens: Number(budget.value) || 30000 } })) {
        if (!alive) return;
        if (msg.delta !== undefined) { text += msg.delta; answer.textContent = text; }
        if (msg.error) toast(msg.error, true);
        if (msg.done) show(msg, Number(budget.value) || 30000);
      }
    } catch (ex) { failed(ex); } finally {
      ask.disabled = false;
      answer.setAttribute('aria-busy', 'false');
    }
  });

  function show(result, limit) {
    const byNumber = new Map(result.references.map((r) => [r.number, r]));
    answer.replaceChildren(...cited(result.answer || '', byNumber, (n, claim) => open(result, byNumber.get(n), claim)));
    answer.dataset.done = 'true';
    refs.replaceChildren(...result.references.map((r) => h('li', { value: r.number },
      h('button', { type: 'button', class: 'link', 'data-ref': r.number, onclick: () => open(result, r) }, r.citation || r.file_path || r.doc_id))));
    if (!result.references.length) refs.append(h('li', { class: 'muted' }, 'The answer cites no source.'));
    contextPane.replaceChildren(...contextView(result, limit));
  }

  async function open(result, ref, claim) {
    if (!ref) return;
    let chunks = result.chunks.filter((c) => ref.chunk_ids.includes(c.id));
    if (chunks.length < ref.chunk_ids.length) {
      try { chunks = (await api('GET', ws('/chunks'), { query: { id: ref.chunk_ids } })).chunks; } catch (ex) { return failed(ex); }
    }
    const claims = claim ? [claim] : sentencesCiting(result.answer || '', ref.number);
    passage.replaceChildren(
      h('h3', {}, `[${ref.number}] ${ref.file_path || ref.doc_id}`),
      ...chunks.map((c) => h('figure', { 'data-chunk': c.id },
        h('figcaption', {}, [c.file_path || c.doc_id, locLabel(c.location)].filter(Boolean).join(' · ')),
        h('blockquote', {}, highlighted(c.content, claims)))),
      h('button', { type: 'button', onclick: () => { passage.hidden = true; } }, 'Close'));
    passage.hidden = false;
    passage.querySelector('button').focus({ preventScroll: true });
    passage.scrollIntoView({ block: 'nearest' });
  }

  return () => { alive = false; };
}

// The answer's text with each [n] a button that opens reference n.
function cited(text, byNumber, open) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    const n = Number(m[1]);
    if (!byNumber.has(n)) continue;
    out.push(text.slice(last, m.index));
    // The claim this marker supports: the text since the line's start or the marker before it.
    const claim = text.slice(Math.max(last, text.lastIndexOf('\n', m.index) + 1), m.index);
    out.push(h('button', { type: 'button', class: 'cite', 'data-cite': n, 'aria-label': `Source ${n}: ${byNumber.get(n).citation}`, onclick: () => open(n, claim) }, `[${n}]`));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

const splitSentences = (t) => t.match(/[^.!?。！？\n]+[.!?。！？]*\s*/g) || [t];
const words = (t) => new Set((t.toLowerCase().match(/[\p{L}\p{N}]{3,}|\p{Script=Han}/gu) || []));

function sentencesCiting(answer, n) {
  // A marker after the full stop ("... Acme. [1]") cites the sentence before it.
  const marker = `[${n}]`;
  const parts = splitSentences(answer);
  const claims = [];
  parts.forEach((s, i) => {
    if (!s.includes(marker)) return;
    claims.push(s);
    if (words(s.replace(/\[\d+\]/g, '')).size < 3 && i > 0) claims.push(parts[i - 1]);
  });
  return claims.length ? claims : [answer];
}

// The passage with the sentences that share most words with the claims marked.
function highlighted(content, claims) {
  const claimWords = words(claims.join(' '));
  const sentences = splitSentences(content);
  const scores = sentences.map((s) => { const w = words(s); let k = 0; for (const x of w) if (claimWords.has(x)) k += 1; return k; });
  const best = Math.max(0, ...scores);
  return sentences.map((s, i) => (best > 0 && scores[i] >= Math.max(2, best * 0.6) ? h('mark', {}, s) : s));
}

function contextView(r, limit) {
  const md = r.metadata || {};
  const tokens = md.tokens || md.token_counts || {};
  const rows = Object.entries(tokens).filter(([, v]) => typeof v === 'number');
  return [
    h('h2', {}, 'What the model was given'),
    h('p', { class: 'budget' }, `Mode ${md.mode || ''}: ${tokens.prompt_total ?? '?'} of ${limit} tokens of budget used.`),
    rows.length ? h('table', {}, h('caption', {}, 'Tokens per section'),
      h('tbody', {}, rows.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', { class: 'num' }, v))))) : '',
    h('details', {}, h('summary', {}, 'Budget, keywords and timings'), h('pre', {}, JSON.stringify(md, null, 1))),
    h('h3', {}, `Entities (${r.entities.length})`),
    list(r.entities, (e) => [h('strong', {}, e.name || e.key), ` (${e.type || 'entity'}) — ${e.description || ''}`]),
    h('h3', {}, `Relations (${r.relations.length})`),
    list(r.relations, (x) => [h('strong', {}, `${x.key[0]} — ${x.key[1]}`), ` ${x.description || ''}`]),
    h('h3', {}, `Chunks (${r.chunks.length})`),
    list(r.chunks, (c) => [h('strong', {}, `[${c.reference ?? ''}] ${c.file_path || c.doc_id} ${locLabel(c.location)}`), h('div', { class: 'snippet' }, c.content)]),
  ];
}

const list = (items, render) => h('ul', { class: 'ctx' }, items.slice(0, 200).map((x) => h('li', {}, render(x))));
