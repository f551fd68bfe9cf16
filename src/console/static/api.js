/* Console JSON API: one fetch wrapper that sends the CSRF token and turns errors into ApiError. */
import { currentPath, go } from './app.js';
import { BASE, state } from './core.js';

// ---------------------------------------------------------------- API
export class ApiError extends Error {
  constructor(message, status, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}
export async function api(method, path, body) {
  const headers = { accept: 'application/json' };
  if (method !== 'GET') headers['x-csrf-token'] = state.csrf;
  const opts = { method, headers, credentials: 'same-origin' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(BASE + '/api' + path, opts);
  } catch (e) {
    throw new ApiError('Cannot reach the server. Check your connection and try again.', 0, null);
  }
  if (res.status === 204) return null;
  let data = null;
  try {
    data = await res.json();
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    const err = data && data.error ? data.error : null;
    const msg = err && err.message ? err.message : 'The server answered HTTP ' + res.status + '.';
    if (res.status === 401 && path !== '/session') {
      // The session ended (expired, signed out elsewhere): back to sign-in, then here again.
      state.me = null;
      go('/login?next=' + encodeURIComponent(currentPath()), true);
    }
    throw new ApiError(msg, res.status, err);
  }
  return data;
}
