import { startGateway, type TestGateway } from '../support/gateway';

/** Each multipart limit is reported as itself: too many files or fields is not "File too large". */

const UPLOAD_LIMIT = 64 * 1024;
let gw: TestGateway;
let key: string;
beforeAll(async () => {
  gw = await startGateway({ logLevel: 'silent', maxUploadBytes: UPLOAD_LIMIT }, { temporal: false });
  key = (await gw.account(0, 'multipart')).key;
});
afterAll(() => gw.close());

function form(parts: Array<{ name: string; filename?: string; data: string | Buffer }>): Buffer {
  const out: Buffer[] = [];
  for (const p of parts) {
    const file = p.filename ? `; filename="${p.filename}"\r\nContent-Type: application/octet-stream` : '';
    out.push(Buffer.from(`--b0\r\nContent-Disposition: form-data; name="${p.name}"${file}\r\n\r\n`));
    out.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data), Buffer.from('\r\n'));
  }
  out.push(Buffer.from('--b0--\r\n'));
  return Buffer.concat(out);
}

async function send(path: string, body: Buffer) {
  const res = await fetch(gw.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=b0' },
    body,
  });
  return { status: res.status, error: ((await res.json()) as { error: { message: string; code: string } }).error };
}

const routes = ['/v1/audio/transcriptions', '/v1/images/edits', '/v1/videos'];

test.each(routes)('%s: too many files is a 400 naming the file limit', async (path) => {
  const res = await send(
    path,
    form(Array.from({ length: 6 }, (_, i) => ({ name: `file${i}`, filename: `f${i}.bin`, data: 'x' }))),
  );
  expect(res.status).toBe(400);
  expect(res.error.code).toBe('too_many_files');
  expect(res.error.message).toMatch(/too many files.*at most 4/i);
});

test.each(routes)('%s: too many fields is a 400 naming the field limit', async (path) => {
  const res = await send(path, form(Array.from({ length: 60 }, (_, i) => ({ name: `f${i}`, data: 'v' }))));
  expect(res.status).toBe(400);
  expect(res.error.code).toBe('too_many_fields');
  expect(res.error.message).toMatch(/too many fields.*at most 50/i);
});

test.each(routes)(
  '%s: field data over the limit is a 413 naming the field limit; a big file is still "File too large"',
  async (path) => {
    const fields = await send(path, form([{ name: 'prompt', data: 'p'.repeat(1024 * 1024 + 10) }]));
    expect(fields.status).toBe(413);
    expect(fields.error.code).toBe('fields_too_large');
    const file = await send(
      path,
      form([{ name: 'file', filename: 'big.bin', data: Buffer.alloc(UPLOAD_LIMIT + 1024 * 1024 * 11, 1) }]),
    );
    expect(file.status).toBe(413);
    expect(file.error.code).toBe('file_too_large');
  },
);
