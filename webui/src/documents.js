// Documents: upload (drop or pick, several at once) with a progress bar per
// ingestion job, and a paged table with status, path, error, access list
// (admins) and delete.
import { api, canWrite, isAdmin, lines, ws } from './api.js';
import { field, fmtTime, h, toast } from './dom.js';
import { failed } from './main.js';

const PAGE = 20;

export async function documentsPage(main) {
  let alive = true;
  const cursors = [null]; // cursor of each page seen, for "previous"
  let pageNo = 0;
  const jobs = h('ul', { class: 'jobs', 'aria-label': 'Ingestion jobs' });
  const tbody = h('tbody');
  const status = h('select', {}, ['', 'pending', 'processing', 'processed', 'failed'].map((s) => h('option', { value: s }, s || 'any')));
  const counter = h('span', { class: 'muted', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', onclick: () => { pageNo -= 1; load(); } }, '← Previous');
  const next = h('button', { type: 'button', onclick: () => { pageNo += 1; load(); } }, 'Next →');
  status.addEventListener('change', () => { cursors.length = 1; pageNo = 0; load(); });

  const head = ['Path', 'Status', 'Chunks', 'Updated', 'Error', ...(isAdmin() ? ['Access'] : []), ...(canWrite() ? [''] : [])];
  const table = h('table', { class: 'docs' }, h('caption', {}, 'Documents in this workspace'),
    h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t)))), tbody);

  main.append(h('h1', {}, 'Documents'));
  if (canWrite()) main.append(uploader(jobs, () => alive, () => load()));
  main.append(h('section', { 'aria-labelledby': 'doclist' },
    h('h2', { id: 'doclist' }, 'Indexed documents'),
    h('div', { class: 'row' }, field('Status', status), counter),
    h('div', { class: 'scroll' }, table),
    h('div', { class: 'row pager' }, prev, next)));

  async function load() {
    try {
      const page = await api('GET', ws('/documents'), { query: { limit: PAGE, cursor: cursors[pageNo] ?? undefined, status: status.value || undefined } });
      cursors[pageNo + 1] = page.next_cursor;
      prev.disabled = pageNo === 0;
      next.disabled = !page.next_cursor;
      counter.textContent = `${page.total} document${page.total === 1 ? '' : 's'}`;
      const access = isAdmin() && page.documents.length
        ? (await api('GET', ws('/documents-access'), { query: { id: page.documents.map((d) => d.id) } })).access : {};
      tbody.replaceChildren(...page.documents.map((d) => row(d, access)));
      if (!page.documents.length) tbody.append(h('tr', {}, h('td', { colspan: head.length, class: 'muted' }, 'No documents yet.')));
    } catch (ex) { failed(ex); }
  }

  function row(d, access) {
    const cells = [
      h('td', { class: 'path' }, d.path || d.id),
      h('td', {}, h('span', { class: `status s-${d.status}` }, d.status)),
      h('td', { class: 'num' }, d.chunks),
      h('td', {}, new Date(d.updated).toLocaleString()),
      h('td', { class: 'error' }, d.error || ''),
    ];
    if (isAdmin()) cells.push(h('td', {}, accessText(access[d.id])));
    if (canWrite()) {
      const retry = d.status === 'failed' ? h('button', {
        type: 'button', 'aria-label': `Retry ${d.path || d.id}`,
        onclick: async (e) => {
          e.target.disabled = true;
          try {
            const { documents } = await api('POST', ws('/documents/retry'), { json: { ids: [d.id] } });
            toast(`${d.path || d.id}: ${documents[0]?.status}`);
          } catch (ex) { failed(ex); }
          load();
        },
      }, 'Retry') : null;
      cells.push(h('td', { class: 'actions' }, retry, h('button', {
        type: 'button', class: 'danger', 'aria-label': `Delete ${d.path || d.id}`,
        onclick: async () => {
          if (!confirm(`Delete ${d.path || d.id}? Its chunks, and the graph facts only it supports, go too.`)) return;
          try {
            await api('DELETE', ws(`/documents/${encodeURIComponent(d.id)}`));
            toast(`Deleted ${d.path || d.id}`);
            load();
          } catch (ex) { failed(ex); }
        },
      }, 'Delete')));
    }
    return h('tr', { 'data-doc': d.id }, cells);
  }

  await load();
  return () => { alive = false; };
}

function accessText(a) {
  if (!a) return 'everyone';
  return [...(a.users || []).map((u) => `user:${u}`), ...(a.groups || []).map((g) => `group:${g}`)].join(', ');
}

function uploader(jobs, alive, reload) {
  const input = h('input', { type: 'file', multiple: true, name: 'files' });
  const users = h('input', { type: 'text', name: 'users', placeholder: 'alice, bob', autocomplete: 'off' });
  const groups = h('input', { type: 'text', name: 'groups', placeholder: 'legal', autocomplete: 'off' });
  const zone = h('div', { class: 'drop', tabindex: '0', role: 'button', 'aria-label': 'Drop files here, or press Enter to choose files' },
    'Drop files here (PDF, Word, PowerPoint, Excel, HTML, EPUB, text, Markdown, CSV), or choose them below.');
  zone.addEventListener('click', () => input.click());
  zone.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); input.click(); } });
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => { e.preventDefault(); zone.classList.remove('over'); submit(e.dataTransfer.files); });
  input.addEventListener('change', () => { if (input.files.length) submit(input.files); input.value = ''; });

  async function submit(files) {
    const form = new FormData();
    for (const f of files) form.append('files', f, f.name);
    for (const u of split(users.value)) form.append('access_users', u);
    for (const g of split(groups.value)) form.append('access_groups', g);
    try {
      const { job } = await api('POST', ws('/documents/upload'), { form });
      follow(job);
    } catch (ex) { failed(ex); }
  }

  async function follow(job) {
    const bar = h('progress', { max: 1, value: 0 });
    const text = h('span', { class: 'muted' });
    const name = (job.files || []).join(', ') || `job ${job.id.slice(0, 8)}`;
    bar.setAttribute('aria-label', `Progress of ${name}`);
    const item = h('li', { 'data-job': job.id }, h('strong', {}, name), bar, text);
    jobs.prepend(item);
    const show = (j) => {
      bar.max = Math.max(j.documents, 1);
      bar.value = j.documents_done;
      item.dataset.state = j.state;
      text.textContent = `${j.state} · documents ${j.documents_done}/${j.documents} · chunks ${j.chunks} · LLM calls ${j.llm_calls} · tokens ${j.tokens} · ETA ${fmtTime(j.eta)}`
        + (j.error ? ` · ${j.error}` : '') + (j.failed && Object.keys(j.failed).length ? ` · failed: ${Object.keys(j.failed).join(', ')}` : '');
    };
    show(job);
    try {
      for await (const j of lines('GET', ws(`/jobs/${job.id}/events`))) {
        if (!alive()) return;
        show(j);
        if (j.documents_done) reload();
      }
    } catch (ex) { failed(ex); }
    if (alive()) reload();
  }

  return h('section', { 'aria-labelledby': 'upload' },
    h('h2', { id: 'upload' }, 'Add documents'),
    zone,
    h('div', { class: 'grid3' },
      field('Files', input),
      field('Readable by users (optional)', users, 'Comma-separated; none and no groups: everyone in the workspace.'),
      field('Readable by groups (optional)', groups)),
    jobs);
}

const split = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
