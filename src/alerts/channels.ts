import nodemailer, { type Transporter } from 'nodemailer';
import { Webhook } from 'standardwebhooks';
import type { OutboundClient } from '../outbound/http-client.ts';
import type { Runtime } from '../runtime.ts';
import type { AlertChannel } from './rules.ts';

export interface AlertMessage {
  type: 'alert.firing' | 'alert.resolved';
  ruleId: string;
  dispatchId: string;
  webhookId: string | null;
  value: number;
  threshold: number;
  occurredAt: string;
}

export interface ChannelResult {
  type: 'webhook' | 'email';
  target: string;
  status: 'sent' | 'failed';
  error: string | null;
}

/** Slack incoming webhooks take `{"text": …}`: a rule whose webhook channel is Slack's gets that shape. */
export function isSlackUrl(url: string): boolean {
  try {
    return new URL(url).hostname === 'hooks.slack.com';
  } catch {
    return false;
  }
}

function describe(m: AlertMessage, ruleName: string, condition: string): string {
  const what = m.type === 'alert.firing' ? 'FIRING' : 'resolved';
  return `[${what}] ${ruleName || m.ruleId}: ${condition} is ${m.value} (threshold ${m.threshold})${m.webhookId ? ` on webhook ${m.webhookId}` : ''} at ${m.occurredAt}`;
}

const transports = new Map<string, Transporter>();
function transportFor(url: string): Transporter {
  let t = transports.get(url);
  if (!t) transports.set(url, (t = nodemailer.createTransport(url)));
  return t;
}

/**
 * Sends one firing or resolution to every channel of the rule: webhook channels get the JSON
 * message (or Slack's `{"text"}` on hooks.slack.com), Standard-Webhooks-signed with the rule's
 * secret, tried ALERT_WEBHOOK_TRIES times with backoff; email channels get a mail over
 * ALERT_SMTP_URL (nodemailer). Never throws: each channel's outcome is returned.
 */
export async function sendAlert(
  rt: Pick<Runtime, 'config'>,
  client: OutboundClient,
  rule: { name: string; conditionType: string; secret: string; channels: AlertChannel[] },
  m: AlertMessage,
): Promise<ChannelResult[]> {
  const text = describe(m, rule.name, rule.conditionType);
  return Promise.all(
    rule.channels.map(async (c): Promise<ChannelResult> => {
      if (c.type === 'email') {
        if (!rt.config.ALERT_SMTP_URL) return { type: 'email', target: c.to, status: 'failed', error: 'ALERT_SMTP_URL is not configured' };
        try {
          await transportFor(rt.config.ALERT_SMTP_URL).sendMail({
            from: rt.config.ALERT_EMAIL_FROM,
            to: c.to,
            subject: `[relay] alert ${m.type === 'alert.firing' ? 'firing' : 'resolved'}: ${rule.name || m.ruleId}`,
            text: `${text}\n\n${JSON.stringify(m, null, 2)}\n`,
          });
          return { type: 'email', target: c.to, status: 'sent', error: null };
        } catch (err) {
          return { type: 'email', target: c.to, status: 'failed', error: (err as Error).message.slice(0, 500) };
        }
      }
      const body = JSON.stringify(isSlackUrl(c.url) ? { text } : m);
      let error = '';
      for (let i = 0; i < rt.config.ALERT_WEBHOOK_TRIES; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 500 * 2 ** (i - 1)));
        const at = new Date();
        const res = await client.send({
          url: c.url,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': 'relay-service-alerts/1',
            'webhook-id': m.dispatchId,
            'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
            'webhook-signature': new Webhook(rule.secret).sign(m.dispatchId, at, body),
          },
          body: Buffer.from(body),
          timeoutMs: 10_000,
        });
        if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) return { type: 'webhook', target: c.url, status: 'sent', error: null };
        error = res.error ?? `HTTP ${res.statusCode}`;
      }
      return { type: 'webhook', target: c.url, status: 'failed', error };
    }),
  );
}
