// Test delivery: routing and the saved transform run against a sample event (nothing stored or sent).
import { useState } from 'preact/hooks';
import { gql } from '../../api.ts';
import { graphql, type ResultOf } from '../../graphql.ts';
import { ActionForm, Field, formText, Json, parseJsonField, Section, TextArea, useAction } from '../../ui.tsx';

const PROBE = graphql(`mutation($id: ID!, $body: JSON, $headers: JSON, $method: String, $path: String, $contentType: String) {
  testWebhookDelivery(id: $id, body: $body, headers: $headers, method: $method, path: $path, contentType: $contentType) {
    matchedRule { name priority match } destination { id name type config } transformed payload transformError
  }
}`);

export function Probe({ webhookId }: { webhookId: string }) {
  const [result, setResult] = useState<ResultOf<typeof PROBE>['testWebhookDelivery']>();
  const run = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const data = await gql(PROBE, {
      id: webhookId,
      body: parseJsonField(String(f.get('body')), 'Body'),
      headers: parseJsonField(String(f.get('headers')), 'Headers'),
      method: formText(f, 'method'),
      path: formText(f, 'path'),
      contentType: formText(f, 'contentType'),
    });
    setResult(data.testWebhookDelivery);
  });
  return (
    <Section title="Test delivery">
      <p class="muted">Runs routing and the saved transform against a sample event. Nothing is stored or sent.</p>
      <ActionForm action={run} submit="Run probe">
        <div class="grid">
          <Field label="Method" name="method" defaultValue="POST" />
          <Field label="Path" name="path" placeholder="/orders" />
          <Field label="Content type" name="contentType" defaultValue="application/json" />
        </div>
        <TextArea label="Body (JSON)" name="body" defaultValue={'{"type": "order.created", "data": {"amount": 42}}'} />
        <TextArea label="Headers (JSON)" name="headers" placeholder='{"x-event": "order"}' />
      </ActionForm>
      {result ? (
        <div class="stack" aria-live="polite" data-testid="probe-result">
          <dl class="facts">
            <dt>Matched rule</dt>
            <dd>{result.matchedRule ? `${result.matchedRule.name} (priority ${result.matchedRule.priority})` : 'none: the default destination'}</dd>
            <dt>Destination</dt>
            <dd>
              {result.destination.name} ({result.destination.type})
            </dd>
            <dt>Transformed</dt>
            <dd>{result.transformed ? 'yes' : 'no'}</dd>
          </dl>
          {result.transformError ? <div class="error-banner">Transform error: {result.transformError}</div> : null}
          <h3>Payload delivered</h3>
          <Json value={result.payload} />
        </div>
      ) : null}
    </Section>
  );
}
