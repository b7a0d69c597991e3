// The shell: sign-in, the workspace picker and the pages (#/documents,
// #/ask, #/graph). The hash names a page only; no key or data goes in a URL.
import './style.css';
import { api, ApiError, session } from './api.js';
import { field, h, toast } from './dom.js';
import { documentsPage } from './documents.js';
import { askPage } from './ask.js';

const pages = {
  documents: documentsPage,
  ask: askPage,
  graph: async (main) => (await import('./graph.js')).graphPage(main),
};
const main = document.getElementById('main');
let leave = null; // the current page's clean-up (streams, renderers)

function signInForm(error) {
  document.getElementById('top').hidden = true;
  const key = h('input', { type: 'password', name: 'key', autocomplete: 'off', required: true, spellcheck: 'false' });
  const err = h('p', { class: 'error', role: 'alert' }, error || '');
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in to ragkit'),
    field('API key', key, 'Made with `ragkit keys create`. Kept in this browser tab only, until you sign out or close it.'),
    err,
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    err.textContent = '';
    try {
      session.info = await api('GET', '/session', { key: key.value.trim() });
      session.key = key.value.trim();
      start();
    } catch (ex) {
      err.textContent = ex instanceof ApiError && ex.status === 401 ? 'That key is unknown or revoked.' : ex.message;
    }
  });
  main.replaceChildren(form);
  key.focus();
}

function start() {
  const info = session.info;
  if (!info.workspaces.includes(session.workspace)) session.workspace = info.workspaces[0];
  const select = document.getElementById('workspace');
  select.replaceChildren(...info.workspaces.map((w) => h('option', { value: w, selected: w === session.workspace }, w)));
  document.getElementById('who').textContent = `${info.user ?? 'local'} · ${info.scope}`;
  document.getElementById('top').hidden = false;
  if (!location.hash.startsWith('#/')) location.hash = '#/documents';
  else route();
}

async function route() {
  if (!session.key || !session.info) return;
  const name = location.hash.slice(2).split('?')[0];
  const page = pages[name] ? name : 'documents';
  for (const a of document.querySelectorAll('nav a')) {
    a.toggleAttribute('aria-current', a.dataset.page === page);
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
  }
  if (leave) { leave(); leave = null; }
  main.replaceChildren();
  try {
    leave = (await pages[page](main)) || null;
  } catch (ex) {
    failed(ex);
  }
  document.title = `ragkit · ${page}`;
}

export function failed(ex) {
  if (ex instanceof ApiError && ex.status === 401) {
    session.key = null;
    signInForm('Your key stopped working; sign in again.');
    return;
  }
  toast(ex.message || String(ex), true);
}

window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (e) => { e.preventDefault(); failed(e.reason); });
document.getElementById('workspace').addEventListener('change', (e) => { session.workspace = e.target.value; route(); });
document.getElementById('signout').addEventListener('click', () => {
  session.key = null;
  session.workspace = null;
  session.info = null;
  if (leave) { leave(); leave = null; }
  history.replaceState(null, '', '/');
  signInForm();
});

(async () => {
  if (!session.key) return signInForm();
  try {
    session.info = await api('GET', '/session');
    start();
  } catch (ex) {
    session.key = null;
    signInForm(ex instanceof ApiError && ex.status === 401 ? '' : ex.message);
  }
})();
