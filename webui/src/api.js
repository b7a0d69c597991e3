// The public HTTP API, with the key in a header. The key lives in this tab's
// sessionStorage only: never in a URL, a cookie or a log line.
const KEY = 'ragkit.key';
const WS = 'ragkit.workspace';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set key(v) { v ? sessionStorage.setItem(KEY, v) : sessionStorage.removeItem(KEY); },
  get workspace() { return sessionStorage.getItem(WS); },
  set workspace(v) { v ? sessionStorage.setItem(WS, v) : sessionStorage.removeItem(WS); },
  info: null, // GET /session: user, groups, scope, workspaces, modes
};

function url(path, query) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    for (const item of Array.isArray(v) ? v : [v]) if (item !== undefined && item !== null) u.searchParams.append(k, item);
  }
  return u.pathname + u.search;
}

export const ws = (path) => `/w/${encodeURIComponent(session.workspace)}${path}`;

async function send(method, path, { json, form, query, key } = {}) {
  const headers = { Authorization: `Bearer ${key || session.key}` };
  let body;
  if (json !== undefined) { headers['Content-Type'] = 'application/json'; body = JSON.stringify(json); }
  if (form !== undefined) body = form;
  const res = await fetch(url(path, query), { method, headers, body });
  if (!res.ok) throw new ApiError(res.status, await message(res));
  return res;
}

async function message(res) {
  const text = await res.text();
  try {
    const data = JSON.parse(text);
    return typeof data.error === 'string' ? data.error : (typeof data.detail === 'string' ? data.detail : text);
  } catch { return text || res.statusText; }
}

export async function api(method, path, opts) {
  return (await send(method, path, opts)).json();
}

// NDJSON lines as they arrive (query/stream, jobs/{id}/events).
export async function* lines(method, path, opts) {
  const res = await send(method, path, opts);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) yield JSON.parse(line);
    }
  }
  if (buf.trim()) yield JSON.parse(buf);
}

export const canWrite = () => ['write', 'admin'].includes(session.info?.scope);
export const isAdmin = () => session.info?.scope === 'admin';
