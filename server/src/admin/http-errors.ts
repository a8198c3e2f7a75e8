/**
 * What the admin API answers when a request fails before any handler runs: a body that is not JSON
 * (with the line and column), a content type no route takes (with the ones it does), a body over the
 * limit (with the limit and the flag that sets it), a method the path does not have (405 with Allow).
 * Every answer keeps the catalog's shape, `{ error: { code, message, fields? } }`.
 */
import { type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { parse as parseLenient, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { CanopyError, ValidationError } from '../domain/errors.js';

/** A request body's media types, per route prefix: everything takes JSON; explain takes a YAML policy too. */
export const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/plain'] as const;
const ACCEPTED: readonly [string, readonly string[]][] = [
  ['/debug/explain', ['application/json', ...YAML_TYPES]],
  ['', ['application/json']],
];

/** The line and column (1-based) of the first syntax error in `text`, and what was expected there. */
export function locateJsonError(text: string): { line: number; column: number; what: string } | undefined {
  const errors: ParseError[] = [];
  parseLenient(text, errors, { allowTrailingComma: false, disallowComments: true, allowEmptyContent: false });
  const first = errors[0];
  if (!first) return undefined;
  const before = text.slice(0, first.offset);
  const line = before.split('\n').length;
  const column = first.offset - before.lastIndexOf('\n');
  const what = printParseErrorCode(first.error)
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase();
  return { line, column, what };
}

/** Fastify's JSON parser (prototype-poisoning checks kept), with a syntax error's place in the message. */
export function registerJsonParser(app: FastifyInstance): void {
  const secure = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    secure(req, String(body), (err: Error | null, value?: unknown) => {
      if (!err || (err as FastifyError).code !== 'FST_ERR_CTP_INVALID_JSON_BODY') return done(err, value);
      const at = locateJsonError(String(body));
      const where = at ? `line ${at.line}, column ${at.column}: ${at.what}` : 'not valid JSON';
      done(
        new ValidationError('CANOPY_BAD_REQUEST', [{ path: '(body)', message: `malformed JSON at ${where}` }]),
        undefined,
      );
    });
  });
}

/**
 * Fastify's own client errors in the catalog's words, or undefined for any other error. `bodyLimit`
 * is the limit in force (the flag that sets it is named).
 */
export function frameworkError(err: FastifyError, req: FastifyRequest, bodyLimit: number): CanopyError | undefined {
  if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    const accepted = ACCEPTED.find(([prefix]) => req.url.startsWith(prefix))?.[1] ?? ['application/json'];
    const sent = req.headers['content-type'];
    return new CanopyError(
      'CANOPY_UNSUPPORTED_MEDIA_TYPE',
      `${sent ? `content type "${sent}" is not accepted` : 'a body needs a Content-Type'}: send ${accepted.join(', ')}`,
    );
  }
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new CanopyError(
      'CANOPY_BODY_TOO_LARGE',
      `the request body is larger than the limit of ${bodyLimit} bytes (${mib(bodyLimit)}); ` +
        "the server's --admin-body-limit (CANOPY_ADMIN_BODY_LIMIT) sets it",
    );
  }
  if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY')
    return new ValidationError('CANOPY_BAD_REQUEST', [
      { path: '(body)', message: 'the Content-Type is application/json but the body is empty' },
    ]);
  return undefined;
}

const mib = (bytes: number) => `${Math.round((bytes / 1024 / 1024) * 100) / 100} MiB`;

const METHODS: readonly HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * The methods each path has, learnt from the app's routes as they are added: a request for a path
 * that exists with another method is a 405 with `Allow`, not a 404.
 */
export function methodsByPath(app: FastifyInstance): (url: string) => string[] {
  const router = FindMyWay({ ignoreTrailingSlash: false, maxParamLength: 1024 });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (!METHODS.includes(method as HTTPMethod)) continue;
      if (router.hasRoute(method as HTTPMethod, route.url)) continue;
      router.on(method as HTTPMethod, route.url, () => {});
    }
  });
  return (url) => {
    const path = url.split('?')[0] ?? url;
    return METHODS.filter((m) => router.find(m, path) !== null);
  };
}
