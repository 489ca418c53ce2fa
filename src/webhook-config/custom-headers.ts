import { z } from 'zod';

/**
 * Headers a webhook (customHeaders) or a webhook destination adds to every delivery: valid
 * names, no line breaks, and none of the names the service sets itself.
 */
// Names the sender controls; anything that frames or signs the request is ours.
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'upgrade', 'te', 'trailer', 'keep-alive', 'expect', 'webhook-id', 'webhook-timestamp', 'webhook-signature']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export const headerMapSchema = z
  .record(z.string().max(4096).refine((v) => !/[\r\n\0]/.test(v), 'must not contain line breaks'))
  .superRefine((h, ctx) => {
    const names = Object.keys(h);
    if (names.length > 50) ctx.addIssue({ code: 'custom', message: 'at most 50 headers' });
    for (const name of names) {
      if (!TOKEN.test(name) || name.length > 256) ctx.addIssue({ code: 'custom', path: [name], message: 'is not a valid header name' });
      else if (RESERVED_HEADERS.has(name.toLowerCase())) ctx.addIssue({ code: 'custom', path: [name], message: 'is set by the service and cannot be overridden' });
    }
  });

