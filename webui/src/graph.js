// Graph: an entity's neighbourhood (depth and node limit; the server's bounds
// always apply), drawn by sigma.js on WebGL, coloured by entity type; a click
// on a node or an edge shows its description and source passages; write keys
// rename, merge and delete. Level of detail: edges and labels are hidden while
// the camera moves, and labels show only for nodes drawn large enough.
import Graph from 'graphology';
import Sigma from 'sigma';
import forceAtlas2 from 'graphology-layout-forceatlas2';
import { api, canWrite, ws } from './api.js';
import { field, h, locLabel, toast } from './dom.js';
import { failed } from './main.js';

const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
const HINT = 'Click a node or an edge.';
const LAYOUT_LIMIT = 2000; // nodes; above it the layout is a fixed spiral (no iterations)

export async function graphPage(main) {
  let renderer = null;
  const name = h('input', { type: 'search', name: 'entity', autocomplete: 'off', required: true, list: 'entity-hits' });
  const hits = h('datalist', { id: 'entity-hits' });
  const depth = h('input', { type: 'number', name: 'depth', min: 0, max: 5, value: 1 });
  const maxNodes = h('input', { type: 'number', name: 'max_nodes', min: 1, max: 10000, value: 200 });
  const form = h('form', { class: 'card row wrap', 'aria-label': 'Show the graph around an entity' },
    field('Entity', name), hits, field('Depth', depth), field('Node limit', maxNodes),
    h('button', { type: 'submit' }, 'Show'));
  const info = h('p', { class: 'muted', 'aria-live': 'polite' });
  const legend = h('ul', { class: 'legend', 'aria-label': 'Entity types' });
  const stage = h('div', { class: 'stage', role: 'img', 'aria-label': 'Graph view' });
  const details = h('aside', { class: 'details', 'aria-label': 'Selection', 'aria-live': 'polite' }, note(HINT));
  main.append(h('h1', {}, 'Graph'), form, info, legend, h('div', { class: 'graphwrap' }, stage, details));

  let selected = 0; // the latest selection (or view) wins over answers still on their way
  let view = 0; // the latest Show wins over an earlier one still loading
  let typing;
  name.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(async () => {
      if (!name.value.trim()) return;
      try {
        const found = await api('GET', ws('/graph/entities'), { query: { q: name.value.trim(), limit: 20 } });
        hits.replaceChildren(...found.map((n) => h('option', { value: n })));
      } catch (ex) { failed(ex); }
    }, 200);
  });
  form.addEventListener('submit', (e) => { e.preventDefault(); show(name.value.trim()); });

  async function show(entity) {
    if (!entity) return;
    // What the details pane and the stats showed belongs to the view being
    // replaced: an edit typed into it would act on the old view's entity.
    const mine = ++view;
    ++selected;
    details.replaceChildren(note('Loading…'));
    window.__ragkitGraph = null;
    const started = performance.now();
    let sub;
    try {
      sub = await api('GET', ws('/graph/subgraph'), {
        query: { name: entity, depth: clamp(depth.value, 0, 5, 1), max_nodes: clamp(maxNodes.value, 1, 10000, 200), max_edges: 100000 },
      });
    } catch (ex) {
      if (mine !== view) return;
      details.replaceChildren(note(HINT));
      if (ex.status === 404) { info.textContent = `No entity “${entity}” here.`; return; }
      return failed(ex);
    }
    if (mine !== view) return;
    const fetched = performance.now();
    draw(sub, entity);
    const drawn = await nextFrame();
    const stats = { nodes: sub.nodes.length, edges: sub.edges.length, fetchMs: fetched - started, renderMs: drawn - fetched, firstRenderMs: drawn - started, truncated: sub.truncated };
    window.__ragkitGraph = stats; // read by the browser tests' measurement
    // The searched entity's details at once: reachable from the keyboard, not only by a click on the canvas.
    const centre = sub.nodes.find((x) => x.id.toLowerCase() === entity.toLowerCase()) || sub.nodes[0];
    if (centre) nodeDetails(centre.id);
    else details.replaceChildren(note(HINT));
    info.textContent = sub.nodes.length
      ? `${stats.nodes} nodes, ${stats.edges} edges${sub.truncated ? ' (cut at the limits: raise them or go less deep)' : ''}, drawn in ${stats.firstRenderMs.toFixed(0)} ms.`
      : `No entity “${entity}” here.`;
  }

  function draw(sub, centre) {
    if (renderer) { renderer.kill(); renderer = null; }
    const g = new Graph({ multi: false, type: 'undirected' });
    const types = new Map();
    const n = sub.nodes.length;
    sub.nodes.forEach((node, i) => {
      const type = String(node.properties.type || 'entity').toLowerCase();
      if (!types.has(type)) types.set(type, PALETTE[types.size % PALETTE.length]);
      const a = i * 2.399963; // golden angle spiral: a stable start for the layout
      const r = Math.sqrt(i + 1);
      g.addNode(node.id, { x: r * Math.cos(a), y: r * Math.sin(a), size: node.id.toLowerCase() === centre.toLowerCase() ? 10 : 5, label: String(node.properties.name || node.id), color: types.get(type), type: 'circle', entityType: type });
    });
    for (const e of sub.edges) {
      if (g.hasNode(e.source) && g.hasNode(e.target) && !g.hasEdge(e.source, e.target)) g.addEdge(e.source, e.target, { size: 1, color: '#c5cbd3' });
    }
    if (n > 1 && n <= LAYOUT_LIMIT) forceAtlas2.assign(g, { iterations: n > 500 ? 30 : 100, settings: forceAtlas2.inferSettings(g) });
    g.forEachNode((node) => { if (g.degree(node) > 8) g.setNodeAttribute(node, 'size', Math.min(14, 5 + Math.log2(g.degree(node)))); });
    legend.replaceChildren(...[...types].map(([t, c]) => h('li', {}, h('span', { class: 'swatch', style: `background:${c}` }), t)));
    renderer = new Sigma(g, stage, {
      hideEdgesOnMove: n > 1000,
      hideLabelsOnMove: true,
      labelRenderedSizeThreshold: n > 1000 ? 12 : n > 200 ? 6 : 0, // labels on demand: zoom in to see more
      enableEdgeEvents: n <= 5000,
      renderEdgeLabels: false,
      defaultEdgeType: 'line',
    });
    renderer.on('clickNode', ({ node }) => nodeDetails(node));
    renderer.on('clickEdge', ({ edge }) => edgeDetails(g.source(edge), g.target(edge)));
    window.__ragkitSigma = renderer;
  }

  async function nodeDetails(key) {
    const mine = ++selected;
    try {
      const e = await api('GET', ws('/graph/entity'), { query: { name: key } });
      const srcs = await sources(e.sources);
      if (mine !== selected) return;
      const p = e.properties;
      details.replaceChildren(h('h2', {}, p.name || e.key), note(`${p.type || 'entity'} · ${e.degree} relations`),
        h('p', { class: 'desc' }, p.description || ''), ...srcs, ...(canWrite() ? editor(e.key, p.name || e.key) : []));
    } catch (ex) { failed(ex); }
  }

  async function edgeDetails(a, b) {
    const mine = ++selected;
    try {
      const r = await api('GET', ws('/graph/relation'), { query: { source: a, target: b } });
      const srcs = await sources(r.sources);
      if (mine !== selected) return;
      const p = r.properties;
      details.replaceChildren(h('h2', {}, `${r.source} — ${r.target}`), note(p.keywords || ''),
        h('p', { class: 'desc' }, p.description || ''), ...srcs);
    } catch (ex) { failed(ex); }
  }

  async function sources(refs) {
    const ids = refs.flatMap((s) => s.chunk_ids).slice(0, 20);
    const chunks = ids.length ? (await api('GET', ws('/chunks'), { query: { id: ids } })).chunks : [];
    return [h('h3', {}, `Sources (${refs.length} document${refs.length === 1 ? '' : 's'})`),
      h('ul', { class: 'ctx' }, chunks.map((c) => h('li', {}, h('strong', {}, [c.file_path || c.doc_id, locLabel(c.location)].filter(Boolean).join(' · ')),
        h('div', { class: 'snippet' }, c.content))))];
  }

  function editor(key, shown) {
    const rename = h('input', { type: 'text', name: 'new_name', value: shown, required: true });
    const into = h('input', { type: 'text', name: 'merge_into', required: true });
    const renameForm = h('form', { 'aria-label': 'Rename' }, field('New name', rename), h('button', { type: 'submit' }, 'Rename'));
    const mergeForm = h('form', { 'aria-label': 'Merge' }, field('Merge into entity', into), h('button', { type: 'submit' }, 'Merge'));
    const del = h('button', { type: 'button', class: 'danger' }, 'Delete entity');
    renameForm.addEventListener('submit', (e) => edit(e, () => api('PATCH', ws('/graph/entity'), { json: { name: key, new_name: rename.value.trim() } }), rename.value.trim()));
    mergeForm.addEventListener('submit', (e) => edit(e, () => api('POST', ws('/graph/merge'), { json: { sources: [key], target: into.value.trim() } }), into.value.trim()));
    del.addEventListener('click', (e) => {
      if (confirm(`Delete ${shown} and its relations?`)) edit(e, () => api('DELETE', ws('/graph/entity'), { query: { name: key } }), null);
    });
    return [h('h3', {}, 'Edit'), renameForm, mergeForm, del];
  }

  async function edit(e, call, next) {
    e.preventDefault();
    try {
      await call();
      toast('Saved');
      if (next) name.value = next;
      await show(name.value.trim());
    } catch (ex) { failed(ex); }
  }

  return () => { if (renderer) renderer.kill(); renderer = null; delete window.__ragkitSigma; };
}

const note = (text) => h('p', { class: 'muted' }, text);
const clamp = (v, lo, hi, d) => { const n = Number.parseInt(v, 10); return Number.isNaN(n) ? d : Math.min(hi, Math.max(lo, n)); };
const nextFrame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))));
