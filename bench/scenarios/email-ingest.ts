import type { Scenario } from '../scenario.ts';
import type { SmtpLoadInput, SmtpLoadOutput } from '../load/smtp-load-process.ts';

const CONNECTIONS = 10;

/** A MIME message with a text part and a 100 KB attachment (base64). */
function message(rcpt: string): string {
  const attachment = Buffer.alloc(100 * 1024, 7).toString('base64').replace(/.{76}/g, '$&\r\n');
  return [
    'From: Bench <bench@sender.test>',
    `To: ${rcpt}`,
    'Subject: bench mail',
    'Message-ID: <bench@sender.test>',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Hello from the bench.',
    '--b1',
    'Content-Type: application/octet-stream',
    'Content-Disposition: attachment; filename="data.bin"',
    'Content-Transfer-Encoding: base64',
    '',
    attachment,
    '--b1--',
  ].join('\r\n');
}

const emailIngest: Scenario = {
  name: 'email-ingest',
  description:
    `SMTP mails over ${CONNECTIONS} parallel connections, each a text part and a 100 KB attachment: RCPT checked, the message parsed (mailparser), ` +
    'the attachment hashed and written to the file store (local disk), the email.received envelope accepted like HTTP ingest with the file row in the same ' +
    'statement, then 250. Latency from the end of DATA to 250. Target: at least 200 mails/s on this machine.',
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
    const created = await api('POST', '/v1/webhooks', { name: 'bench email', url: 'http://127.0.0.1:9/hook', defaultDelaySeconds: 86_400 });
    if (created.status !== 201) throw new Error(`POST /v1/webhooks answered ${created.status} ${JSON.stringify(created.body)}`);
    const { id, emailIngestAddress } = created.body;
    try {
      const out = await ctx.runLoadProcess<SmtpLoadOutput>('bench/load/smtp-load-process.ts', {
        port: ctx.smtpPort,
        rcpt: emailIngestAddress,
        connections: CONNECTIONS,
        warmup: ctx.settings.warmup,
        duration: ctx.settings.duration,
        message: message(emailIngestAddress),
      } satisfies SmtpLoadInput);
      if (out.mails === 0) throw new Error(`no mail was accepted (${out.failures} failures)`);
      if (out.failures > out.mails * 0.01) throw new Error(`${out.failures} of ${out.mails + out.failures} mails failed`);
      return [
        {
          name: 'email-ingest',
          throughput: Math.round((out.mails / out.elapsed) * 10) / 10,
          unit: 'mails/s',
          p50Ms: out.p50Ms,
          p99Ms: out.p99Ms,
          connections: CONNECTIONS,
          duration: ctx.settings.duration,
          requests: out.mails,
          failures: out.failures,
          notes: '100 KB attachment per mail, stored on local disk; p50/p99 from the end of DATA to 250',
        },
      ];
    } finally {
      await api('POST', `/v1/webhooks/${id}/archive`);
      await api('POST', `/v1/webhooks/${id}/destroy`);
    }
  },
};

export default emailIngest;
