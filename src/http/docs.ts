import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { MethodNotAllowed, NotFound } from '../errors.ts';

/**
 * `/docs`: the reference page. Swagger UI (swagger-ui-dist, from node_modules, served by this
 * process: no CDN, works offline) renders `/v1/openapi.json`.
 */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="reference"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/reference.js"></script>
</body>
</html>
`;

// validatorUrl: null keeps the page from sending the document to swagger.io's validator.
const INIT = `window.ui = SwaggerUIBundle({
  url: '/v1/openapi.json',
  dom_id: '#reference',
  deepLinking: true,
  validatorUrl: null,
  defaultModelsExpandDepth: 0,
  docExpansion: 'list',
  filter: true,
});
`;

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

export function createDocsHandler() {
  const dist = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const cache = new Map<string, Buffer>();
  const asset = (name: string) => {
    let bytes = cache.get(name);
    if (!bytes) cache.set(name, (bytes = readFileSync(path.join(dist, name))));
    return bytes;
  };
  const send = (res: ServerResponse, type: string, body: string | Buffer, maxAge: number) => {
    res.writeHead(200, {
      'content-type': type,
      'content-length': Buffer.byteLength(body),
      'cache-control': `public, max-age=${maxAge}`,
      'x-content-type-options': 'nosniff',
    });
    res.end(body);
  };

  return function handleDocs(req: IncomingMessage, res: ServerResponse, url: URL) {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new MethodNotAllowed(['GET']);
    const name = url.pathname.replace(/^\/docs\/?/, '');
    if (name === '') return send(res, 'text/html; charset=utf-8', PAGE, 300);
    if (name === 'reference.js') return send(res, 'text/javascript; charset=utf-8', INIT, 300);
    const type = ASSETS[name];
    if (!type) throw new NotFound('page');
    return send(res, type, asset(name), 86_400);
  };
}
