// Every control of a webhook, for creating it and for editing it.
import { Field, Select, TextArea, formText, parseJsonField } from '../ui.tsx';
import { ApiError } from '../api.ts';
import { graphql } from '../graphql.ts';

export interface WebhookSettings {
  name: string;
  deliveryMode: string;
  maxInFlight: number;
  timeoutMs: number;
  throttleRatePerSecond: number | null;
  defaultDelaySeconds: number | null;
  dedupeWindowSeconds: number;
  idempotencyWindowSeconds: number;
  retryPolicy: unknown;
  customHeaders: unknown;
}

export const SETTINGS_FIELDS = graphql(`fragment WebhookSettingsFields on Webhook @_unmask { name deliveryMode maxInFlight timeoutMs throttleRatePerSecond defaultDelaySeconds dedupeWindowSeconds idempotencyWindowSeconds retryPolicy { maxAttempts backoff initialDelayMs maxDelayMs jitter retryOn } customHeaders }`);

const str = (v: number | null | undefined) => (v === null || v === undefined ? '' : String(v));

export function WebhookControls({ initial }: { initial?: WebhookSettings }) {
  return (
    <>
      <div class="grid">
        <Field label="Name" name="name" defaultValue={initial?.name ?? ''} placeholder="Orders from Stripe" />
        {initial ? null : <Field label="Destination URL" name="url" type="url" required placeholder="https://example.com/hooks" hint="Where deliveries are sent (the default destination)." />}
        <Select
          label="Delivery mode"
          name="deliveryMode"
          defaultValue={initial?.deliveryMode ?? 'parallel'}
          options={[
            ['parallel', 'parallel'],
            ['strict_fifo', 'strict FIFO (Pro and above)'],
          ]}
        />
        <Field label="Max in flight" name="maxInFlight" type="number" min={1} max={100} defaultValue={str(initial?.maxInFlight)} placeholder="10" hint="1..100" />
        <Field label="Timeout (ms)" name="timeoutMs" type="number" min={1000} max={60000} defaultValue={str(initial?.timeoutMs)} placeholder="10000" hint="1000..60000" />
        <Field label="Throttle (deliveries/s)" name="throttleRatePerSecond" type="number" min={1} max={1000} defaultValue={str(initial?.throttleRatePerSecond)} hint="Empty: no limit (Pro and above)" />
        <Field label="Default delay (s)" name="defaultDelaySeconds" type="number" min={0} max={604800} defaultValue={str(initial?.defaultDelaySeconds)} hint="Empty: none (Pro and above)" />
        <Field label="Deduplication window (s)" name="dedupeWindowSeconds" type="number" min={0} max={604800} defaultValue={str(initial?.dedupeWindowSeconds)} placeholder="0" hint="0: off" />
        <Field
          label="Idempotency window (s)"
          name="idempotencyWindowSeconds"
          type="number"
          min={0}
          max={604800}
          defaultValue={str(initial?.idempotencyWindowSeconds)}
          placeholder="86400"
          hint="How long an Idempotency-Key is remembered; 0: recorded, never enforced"
        />
      </div>
      <TextArea
        label="Retry policy (JSON)"
        name="retryPolicy"
        defaultValue={initial ? JSON.stringify(initial.retryPolicy, null, 2) : ''}
        placeholder='{"maxAttempts": 8, "backoff": "exponential"}'
        hint="maxAttempts, backoff, initialDelayMs, maxDelayMs, jitter, retryOn; left-out fields take the defaults (other than the default: Starter and above)."
      />
      <TextArea
        label="Custom headers (JSON)"
        name="customHeaders"
        defaultValue={initial ? JSON.stringify(initial.customHeaders, null, 2) : ''}
        placeholder='{"x-team": "payments"}'
        hint="Added to every delivery (Starter and above)."
      />
    </>
  );
}

function int(v: FormDataEntryValue | null, field: string, nullable: boolean): number | null | undefined {
  const s = typeof v === 'string' ? v.trim() : '';
  if (s === '') return nullable ? null : undefined;
  const n = Number(s);
  if (!Number.isInteger(n)) throw new ApiError(`${field} must be a whole number.`, 'invalid_request');
  return n;
}

/** The form's controls as mutation variables. `editing`: an emptied optional limit is sent as null (removed). */
export function controlsFromForm(form: HTMLFormElement, editing = false): Record<string, unknown> {
  const f = new FormData(form);
  const vars: Record<string, unknown> = {
    name: (f.get('name') as string) || undefined,
    deliveryMode: formText(f, 'deliveryMode'),
    maxInFlight: int(f.get('maxInFlight'), 'Max in flight', false),
    timeoutMs: int(f.get('timeoutMs'), 'Timeout', false),
    throttleRatePerSecond: int(f.get('throttleRatePerSecond'), 'Throttle', editing),
    defaultDelaySeconds: int(f.get('defaultDelaySeconds'), 'Default delay', editing),
    dedupeWindowSeconds: int(f.get('dedupeWindowSeconds'), 'Deduplication window', false),
    idempotencyWindowSeconds: int(f.get('idempotencyWindowSeconds'), 'Idempotency window', false),
    retryPolicy: parseJsonField(String(f.get('retryPolicy') ?? ''), 'Retry policy'),
    customHeaders: parseJsonField(String(f.get('customHeaders') ?? ''), 'Custom headers'),
  };
  if (!editing) vars.url = formText(f, 'url');
  return vars;
}
