// Settings: every control of the webhook (only what changed is sent).
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ActionForm, Section, useAction } from '../../ui.tsx';
import { WebhookControls, controlsFromForm } from '../../parts/webhook-controls.tsx';
import { WEBHOOK, type Webhook } from './webhook.ts';

export function Settings({ webhook, onSaved }: { webhook: Webhook; onSaved: (w: Webhook) => void }) {
  const save = useAction(async (form: HTMLFormElement) => {
    // Only what changed: an untouched control is not re-sent (nor checked against the tier again).
    const changed = Object.entries(controlsFromForm(form, true)).filter(([k, v]) => v !== undefined && JSON.stringify(v) !== JSON.stringify(webhook[k as keyof Webhook]));
    const vars = { id: webhook.id, ...Object.fromEntries(changed) };
    const data = await gql(
      graphql(`mutation($id: ID!, $name: String, $maxInFlight: Int, $timeoutMs: Int, $deliveryMode: DeliveryMode, $throttleRatePerSecond: Int, $defaultDelaySeconds: Int, $dedupeWindowSeconds: Int, $idempotencyWindowSeconds: Int, $retryPolicy: JSON, $customHeaders: JSON) {
        updateWebhook(id: $id, name: $name, maxInFlight: $maxInFlight, timeoutMs: $timeoutMs, deliveryMode: $deliveryMode, throttleRatePerSecond: $throttleRatePerSecond, defaultDelaySeconds: $defaultDelaySeconds, dedupeWindowSeconds: $dedupeWindowSeconds, idempotencyWindowSeconds: $idempotencyWindowSeconds, retryPolicy: $retryPolicy, customHeaders: $customHeaders) { ...WebhookFields }
      }`, [WEBHOOK]),
      vars,
    );
    onSaved(data.updateWebhook);
  });
  return (
    <Section title="Settings">
      <ActionForm action={save} submit="Save settings" done="Saved." formKey={webhook.updatedAt}>
        <WebhookControls initial={webhook} />
      </ActionForm>
    </Section>
  );
}
