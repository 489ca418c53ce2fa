import type { Scenario } from '../scenario.ts';

const BOUNDARY = 'benchformboundary7MA4YWxkTrZu0gW';
/** A 100 KB file (printable, so the body travels as a string). */
const FILE = 'abcdefghij'.repeat(10 * 1024);

const body = (secret: string) =>
  [
    `--${BOUNDARY}\r\ncontent-disposition: form-data; name="_secret"\r\n\r\n${secret}\r\n`,
    `--${BOUNDARY}\r\ncontent-disposition: form-data; name="name"\r\n\r\nAna\r\n`,
    `--${BOUNDARY}\r\ncontent-disposition: form-data; name="email"\r\n\r\nana@example.com\r\n`,
    `--${BOUNDARY}\r\ncontent-disposition: form-data; name="cv"; filename="cv.txt"\r\ncontent-type: text/plain\r\n\r\n${FILE}\r\n`,
    `--${BOUNDARY}--\r\n`,
  ].join('');

const formIngest: Scenario = {
  name: 'form-ingest',
  description:
    'POST /f/{publicId} as multipart/form-data: two fields, the `_secret` field and a 100 KB file, parsed while streaming (busboy), the file hashed ' +
    'and written to the file store (local disk), then the form.submitted envelope accepted like HTTP ingest, with the file row and its file-storage bytes in the same statement, answered 202. ' +
    'Compared with ingest-http of the same run (target: at least 0.5x its events/s).',
  baseline: 'ingest-http',
  async run(ctx) {
    const api = async (method: string, path: string, payload?: unknown) => {
      const res = await fetch(`${ctx.serviceUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
        body: payload === undefined ? undefined : JSON.stringify(payload),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const created = await api('POST', '/v1/webhooks', { name: 'bench form', url: 'http://127.0.0.1:9/hook', defaultDelaySeconds: 86_400 });
    if (created.status !== 201) throw new Error(`POST /v1/webhooks answered ${created.status} ${JSON.stringify(created.body)}`);
    const { id, publicId, ingestSecret } = created.body;
    const request = { method: 'POST' as const, path: `/f/${publicId}`, headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` }, body: body(ingestSecret) };
    try {
      const probe = await fetch(`${ctx.serviceUrl}${request.path}`, { ...request, signal: AbortSignal.timeout(10_000) });
      const answer: any = await probe.json();
      if (probe.status !== 202 || !answer?.eventId) throw new Error(`form ingest answered ${probe.status} ${JSON.stringify(answer)}`);
      const figures = await ctx.autocannon(request);
      return [{ name: 'form-ingest', ...figures, unit: 'events/s', notes: '100 KB file per post, stored on local disk' }];
    } finally {
      await api('POST', `/v1/webhooks/${id}/archive`);
      await api('POST', `/v1/webhooks/${id}/destroy`);
    }
  },
};

export default formIngest;
