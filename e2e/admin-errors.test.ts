/**
 * The admin API's answers to requests that fail before a handler runs, over HTTP against a real
 * `canopy serve` with a small --admin-body-limit: malformed JSON names its line and column, a wrong
 * content type names the accepted ones (415), a body over the limit names the limit and its flag (413),
 * a wrong method is 405 with Allow, and each keeps the `{ error: { code, message, fields? } }` shape.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

interface ErrorBody {
  error: { code: string; message: string; fields?: { path: string; message: string }[] };
}

const LIMIT = 4096;

describe('admin API errors', () => {
  let server: CanopyProcess;
  const send = async (method: string, path: string, body?: string, type?: string) => {
    const res = await fetch(`${server.adminUrl}${path}`, {
      method,
      ...(body !== undefined ? { body } : {}),
      headers: type ? { 'content-type': type } : {},
    });
    const json = (await res.json()) as ErrorBody;
    // The catalog's shape, whatever the failure.
    assert.deepEqual(Object.keys(json), ['error']);
    assert.equal(typeof json.error.code, 'string');
    assert.equal(typeof json.error.message, 'string');
    return { status: res.status, headers: res.headers, error: json.error };
  };

  before(async () => {
    server = await startCanopyProcess(
      { services: [{ name: 'echo', endpoints: [{ address: '10.0.0.1', port: 80 }] }] },
      ['--admin-body-limit', String(LIMIT)],
    );
  });
  after(async () => {
    await server?.stop();
  });

  it('malformed JSON names the line and column', async () => {
    const body = '{\n  "endpoints": [\n    { "address": "10.0.0.2", "port": 80, }\n  ]\n}';
    const r = await send('PUT', '/api/v1/services/echo', body, 'application/json');
    assert.equal(r.status, 400);
    assert.equal(r.error.code, 'CANOPY_BAD_REQUEST');
    assert.match(r.error.message, /malformed JSON at line 3, column 42/);
    assert.deepEqual(
      r.error.fields?.map((f) => f.path),
      ['(body)'],
    );
    const truncated = await send(
      'PATCH',
      '/api/v1/services/echo/endpoints/10.0.0.1:80',
      '{"health":',
      'application/json',
    );
    assert.match(truncated.error.message, /line 1, column 11: value expected/);
  });

  it('prototype poisoning is still refused', async () => {
    const r = await send(
      'PUT',
      '/api/v1/services/echo',
      '{"__proto__": {"x": 1}, "endpoints": []}',
      'application/json',
    );
    assert.equal(r.status, 400);
  });

  it('a wrong content type is 415 naming what is accepted', async () => {
    const r = await send('PUT', '/api/v1/services/echo', 'endpoints: []', 'application/yaml');
    assert.equal(r.status, 415);
    assert.equal(r.error.code, 'CANOPY_UNSUPPORTED_MEDIA_TYPE');
    assert.match(r.error.message, /"application\/yaml" is not accepted: send application\/json$/);
    const explain = await send('POST', '/debug/explain?service=echo', '<x/>', 'application/xml');
    assert.equal(explain.status, 415);
    assert.match(explain.error.message, /send application\/json, application\/yaml/);
  });

  it('a body over the limit is 413 naming the limit and the flag', async () => {
    const big = JSON.stringify({ endpoints: [], pad: 'x'.repeat(LIMIT) });
    const r = await send('PUT', '/api/v1/services/echo', big, 'application/json');
    assert.equal(r.status, 413);
    assert.equal(r.error.code, 'CANOPY_BODY_TOO_LARGE');
    assert.match(r.error.message, new RegExp(`limit of ${LIMIT} bytes`));
    assert.match(r.error.message, /--admin-body-limit \(CANOPY_ADMIN_BODY_LIMIT\)/);
  });

  it('a wrong method is 405 with Allow; an unknown path stays 404', async () => {
    const r = await send('POST', '/api/v1/services/echo');
    assert.equal(r.status, 405);
    assert.equal(r.error.code, 'CANOPY_METHOD_NOT_ALLOWED');
    assert.deepEqual(r.headers.get('allow')?.split(', ').sort(), ['DELETE', 'GET', 'HEAD', 'PUT']);
    assert.match(r.error.message, /takes .*PUT.*, not POST/);
    const list = await send('DELETE', '/api/v1/services');
    assert.equal(list.status, 405);
    assert.deepEqual(list.headers.get('allow')?.split(', ').sort(), ['GET', 'HEAD']);
    const missing = await send('GET', '/api/v1/nothing-here');
    assert.equal(missing.status, 404);
    assert.equal(missing.error.code, 'CANOPY_NOT_FOUND');
  });
});
