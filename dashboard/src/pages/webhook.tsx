// One webhook: addresses and lifecycle, every control, destinations, routing rules, transform,
// the test-delivery probe, secrets (rotation shows the new secret once), provider pack, quota overrides,
// the email sender allowlist and browser-form access (CONTRACT §12).
import { useEffect, useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { gql } from '../api.ts';
import { Badge, ConfirmButton, Copyable, Empty, ErrorBanner, Field, Json, Loading, LoadMore, Page, Section, Select, TextArea, Time, parseJsonField, slug, useAction, usePaged, useQuery } from '../ui.tsx';
import { SETTINGS_FIELDS, WebhookControls, controlsFromForm, type WebhookSettings } from '../parts/webhook-controls.tsx';
import { curlExample } from './webhooks.tsx';
import { DESTINATION_TYPES } from '../destination-types.ts';

interface Webhook extends WebhookSettings {
  id: string;
  status: string;
  publicId: string;
  ingestUrl: string;
  formIngestUrl: string;
  emailIngestAddress: string;
  formAccess: string;
  formAllowedOrigins: string[];
  createdAt: string;
  updatedAt: string;
}

interface Destination {
  id: string;
  name: string;
  type: string;
  config: Record<string, unknown>;
  isDefault: boolean;
  hasCredentials: boolean;
  /** cli destinations: whether a `relay listen` session takes its deliveries now. */
  listenerConnected: boolean;
}

const WEBHOOK = `id status publicId ingestUrl formIngestUrl emailIngestAddress formAccess formAllowedOrigins createdAt updatedAt ${SETTINGS_FIELDS}`;

function Lifecycle({ webhook, onChange }: { webhook: Webhook; onChange: (w?: Webhook) => void }) {
  const [, navigate] = useLocation();
  const act = useAction(async (mutation: string) => {
    const data = await gql<Record<string, Webhook>>(`mutation($id: ID!) { ${mutation}(id: $id) { ${WEBHOOK} } }`, { id: webhook.id });
    onChange(data[mutation]);
  });
  const destroy = useAction(async () => {
    await gql(`mutation($id: ID!) { destroyWebhook(id: $id) { id deleted } }`, { id: webhook.id });
    navigate('/webhooks');
  });
  return (
    <div class="stack">
      <div class="row">
        {webhook.status === 'active' ? (
          <button type="button" onClick={() => act.call('pauseWebhook')} disabled={act.pending}>
            Pause
          </button>
        ) : null}
        {webhook.status === 'paused' ? (
          <button type="button" class="primary" onClick={() => act.call('resumeWebhook')} disabled={act.pending}>
            Resume
          </button>
        ) : null}
        {webhook.status !== 'archived' ? (
          <ConfirmButton
            label="Archive"
            title="Archive this webhook?"
            body="Ingest will answer 404 and nothing more is delivered. Its history stays readable, and it can be restored (paused)."
            onConfirm={() => act.call('archiveWebhook')}
          />
        ) : (
          <>
            <button type="button" onClick={() => act.call('restoreWebhook')} disabled={act.pending}>
              Restore
            </button>
            <ConfirmButton
              label="Destroy"
              danger
              title="Destroy this webhook for good?"
              body="The webhook, its events, deliveries, attempts and DLQ entries are removed. This cannot be undone."
              confirmText={webhook.name || webhook.id}
              confirmLabel="Destroy forever"
              onConfirm={() => destroy.call()}
            />
          </>
        )}
      </div>
      <ErrorBanner error={act.error ?? destroy.error} />
    </div>
  );
}

function Settings({ webhook, onSaved }: { webhook: Webhook; onSaved: (w: Webhook) => void }) {
  const [saved, setSaved] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    // Only what changed: an untouched control is not re-sent (nor checked against the tier again).
    const changed = Object.entries(controlsFromForm(form, true)).filter(([k, v]) => v !== undefined && JSON.stringify(v) !== JSON.stringify((webhook as unknown as Record<string, unknown>)[k]));
    const vars = { id: webhook.id, ...Object.fromEntries(changed) };
    const data = await gql<{ updateWebhook: Webhook }>(
      `mutation($id: ID!, $name: String, $maxInFlight: Int, $timeoutMs: Int, $deliveryMode: DeliveryMode, $throttleRatePerSecond: Int, $defaultDelaySeconds: Int, $dedupeWindowSeconds: Int, $retryPolicy: JSON, $customHeaders: JSON) {
        updateWebhook(id: $id, name: $name, maxInFlight: $maxInFlight, timeoutMs: $timeoutMs, deliveryMode: $deliveryMode, throttleRatePerSecond: $throttleRatePerSecond, defaultDelaySeconds: $defaultDelaySeconds, dedupeWindowSeconds: $dedupeWindowSeconds, retryPolicy: $retryPolicy, customHeaders: $customHeaders) { ${WEBHOOK} }
      }`,
      vars,
    );
    onSaved(data.updateWebhook);
    setSaved(true);
  });
  return (
    <Section title="Settings">
      <form
        class="stack"
        key={webhook.updatedAt}
        onSubmit={(e) => {
          e.preventDefault();
          setSaved(false);
          void save.call(e.currentTarget);
        }}
      >
        <WebhookControls initial={webhook} />
        <ErrorBanner error={save.error} />
        {saved ? (
          <p class="success-banner" role="status">
            Saved.
          </p>
        ) : null}
        <div class="row">
          <button type="submit" class="primary" disabled={save.pending}>
            Save settings
          </button>
        </div>
      </form>
    </Section>
  );
}

/** How often a cli destination's listener state is asked again while the page is open. */
const LISTENER_POLL_MS = 5_000;

/** A cli destination: whether `relay listen` is connected now, and the command that connects one. */
function ListenerStatus({ webhookId, d }: { webhookId: string; d: Destination }) {
  const [connected, setConnected] = useState(d.listenerConnected);
  useEffect(() => {
    let live = true;
    const timer = setInterval(() => {
      gql<{ webhookDestinations: { items: { id: string; listenerConnected: boolean }[] } }>(`query($id: ID!) { webhookDestinations(id: $id) { items { id listenerConnected } } }`, { id: webhookId }).then(
        (data) => live && setConnected(data.webhookDestinations.items.find((x) => x.id === d.id)?.listenerConnected ?? false),
        () => {},
      );
    }, LISTENER_POLL_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [webhookId, d.id]);
  const command = `relay listen ${webhookId}${d.isDefault ? '' : ` --destination ${d.id}`} --forward-to http://localhost:4000/webhooks`;
  return (
    <div class="stack">
      <p role="status">
        {connected ? <span class="badge tone-ok">listener connected</span> : <span class="badge tone-warn">no listener</span>}{' '}
        <span class="muted">
          {connected
            ? 'Deliveries go to a relay listen session, which sends them from the developer\'s machine.'
            : 'Attempts fail with "no listener connected" and are retried until a relay listen session connects.'}
        </span>
      </p>
      <Copyable value={command} label="The command that forwards this destination's deliveries to a local server" />
    </div>
  );
}

function DestinationRow({ webhookId, d, onChange }: { webhookId: string; d: Destination; onChange: () => void }) {
  const [editing, setEditing] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    await gql(`mutation($id: ID!, $destinationId: ID!, $name: String, $config: JSON) { updateDestination(id: $id, destinationId: $destinationId, name: $name, config: $config) { id } }`, {
      id: webhookId,
      destinationId: d.id,
      name: f.get('name') || undefined,
      config: parseJsonField(String(f.get('config')), 'Config'),
    });
    setEditing(false);
    onChange();
  });
  const remove = useAction(async () => {
    await gql(`mutation($id: ID!, $destinationId: ID!) { deleteDestination(id: $id, destinationId: $destinationId) { id } }`, { id: webhookId, destinationId: d.id });
    onChange();
  });
  return (
    <li class="card">
      <div class="card-header">
        <h3>
          {d.name} {d.isDefault ? <span class="badge tone-info">default</span> : null}
        </h3>
        <span class="muted">{d.type}</span>
        <div class="row">
          <button type="button" class="small" aria-expanded={editing} onClick={() => setEditing(!editing)}>
            {editing ? 'Cancel' : 'Edit'}
          </button>
          {d.isDefault ? null : (
            <ConfirmButton label="Delete" danger title={`Delete destination ${d.name}?`} body="Routing rules that use it must be removed first." onConfirm={() => remove.call()} />
          )}
        </div>
      </div>
      {editing ? (
        <form
          class="stack"
          onSubmit={(e) => {
            e.preventDefault();
            void save.call(e.currentTarget);
          }}
        >
          <Field label="Name" name="name" defaultValue={d.name} />
          <TextArea label="Config (JSON)" name="config" defaultValue={JSON.stringify(d.config, null, 2)} hint="Replaced as a whole; stored credentials are kept when left out." />
          <button type="submit" class="primary" disabled={save.pending}>
            Save destination
          </button>
        </form>
      ) : (
        <Json value={d.config} />
      )}
      {d.type === 'cli' ? <ListenerStatus webhookId={webhookId} d={d} /> : null}
      {d.hasCredentials ? <p class="muted">Credentials are stored (sealed, never shown).</p> : null}
      <ErrorBanner error={save.error ?? remove.error} />
    </li>
  );
}

function Destinations({ webhookId, destinations, onChange }: { webhookId: string; destinations: Destination[]; onChange: () => void }) {
  const add = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    await gql(`mutation($id: ID!, $name: String!, $type: String!, $config: JSON!) { createDestination(id: $id, name: $name, type: $type, config: $config) { id } }`, {
      id: webhookId,
      name: f.get('name'),
      type: f.get('type'),
      config: parseJsonField(String(f.get('config')), 'Config') ?? {},
    });
    form.reset();
    onChange();
  });
  return (
    <Section title="Destinations">
      <ul class="list stack">
        {destinations.map((d) => (
          <DestinationRow key={d.id} webhookId={webhookId} d={d} onChange={onChange} />
        ))}
      </ul>
      <details>
        <summary>Add a destination</summary>
        <form
          class="stack"
          onSubmit={(e) => {
            e.preventDefault();
            void add.call(e.currentTarget);
          }}
        >
          <div class="grid">
            <Field label="Name" name="name" required placeholder="archive" />
            <Select label="Type" name="type" options={DESTINATION_TYPES} />
          </div>
          <TextArea label="Config (JSON)" name="config" placeholder='{"url": "https://example.com/archive"}' hint="webhook: {url, method?, headers?}; cli: {} (delivered through relay listen); other types take their own settings and credentials." />
          <ErrorBanner error={add.error} />
          <button type="submit" class="primary" disabled={add.pending}>
            Add destination
          </button>
        </form>
      </details>
    </Section>
  );
}

interface Rule {
  name: string;
  priority: number;
  destinationId: string;
  match: unknown;
}

function Routing({ webhookId, rules, destinations }: { webhookId: string; rules: Rule[]; destinations: Destination[] }) {
  const [draft, setDraft] = useState(() => rules.map((r) => ({ ...r, matchText: JSON.stringify(r.match, null, 2) })));
  const [saved, setSaved] = useState(false);
  const save = useAction(async () => {
    const input = draft.map((r, i) => ({ name: r.name, priority: Number(r.priority), destinationId: r.destinationId, match: parseJsonField(r.matchText, `Rule ${i + 1} match`) ?? {} }));
    await gql(`mutation($id: ID!, $rules: [RoutingRuleInput!]!) { setWebhookRouting(id: $id, rules: $rules) { rules { name } } }`, { id: webhookId, rules: input });
    // The draft is what was saved: no reload (it would remount this section and hide the notice).
    setSaved(true);
  });
  const update = (i: number, patch: Partial<(typeof draft)[number]>) => {
    setSaved(false);
    setDraft(draft.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  };
  const options: [string, string][] = destinations.map((d) => [d.id, d.name]);
  return (
    <Section title="Routing rules">
      <p class="muted">The first matching rule (lowest priority number) picks the destination; no match: the default destination. A match is a MongoDB-style query over channel, method, path, query, headers, contentType and body.</p>
      {draft.length === 0 ? <p>No rules: every event goes to the default destination.</p> : null}
      <ol class="list stack">
        {draft.map((r, i) => (
          <li key={i} class="card">
            <div class="grid">
              <Field label="Name" name={`rule-${i}-name`} value={r.name} onInput={(e) => update(i, { name: e.currentTarget.value })} />
              <Field label="Priority" name={`rule-${i}-priority`} type="number" value={String(r.priority)} onInput={(e) => update(i, { priority: Number(e.currentTarget.value) })} />
              <Select label="Destination" name={`rule-${i}-dest`} value={r.destinationId} options={options} onChange={(e) => update(i, { destinationId: e.currentTarget.value })} />
            </div>
            <TextArea label="Match (JSON)" name={`rule-${i}-match`} value={r.matchText} onInput={(e) => update(i, { matchText: e.currentTarget.value })} />
            <button type="button" class="small" onClick={() => setDraft(draft.filter((_, j) => j !== i))}>
              Remove rule
            </button>
          </li>
        ))}
      </ol>
      <div class="row">
        <button
          type="button"
          onClick={() =>
            setDraft([...draft, { name: `rule-${draft.length + 1}`, priority: (draft.at(-1)?.priority ?? 0) + 10, destinationId: destinations[0]?.id ?? '', match: {}, matchText: '{"body.type": "order.created"}' }])
          }
        >
          Add rule
        </button>
        <button type="button" class="primary" onClick={() => save.call()} disabled={save.pending}>
          Save rules
        </button>
      </div>
      {saved ? (
        <p class="success-banner" role="status">
          Rules saved.
        </p>
      ) : null}
      <ErrorBanner error={save.error} />
    </Section>
  );
}

function Transform({ webhookId, transform }: { webhookId: string; transform: { kind: string | null; expression: string | null; automationId: string | null; version: number | null } }) {
  const [kind, setKind] = useState(transform.kind ?? '');
  const [saved, setSaved] = useState(false);
  // The project's automations, for kind "automation" (Starter and above; an error here only hides the list).
  const automations = useQuery(() => gql(`{ automations(limit: 100) { items { id name currentVersion status } } }`).then((d) => d.automations.items as any[]), []);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const version = String(f.get('version') ?? '').trim();
    await gql(`mutation($id: ID!, $kind: String, $expression: String, $automationId: String, $version: Int) { setWebhookTransform(id: $id, kind: $kind, expression: $expression, automationId: $automationId, version: $version) { kind } }`, {
      id: webhookId,
      kind: kind || null,
      expression: kind === 'jsonata' ? f.get('expression') : undefined,
      automationId: kind === 'automation' ? f.get('automationId') : undefined,
      version: kind === 'automation' && version ? Number(version) : undefined,
    });
    setSaved(true);
  });
  return (
    <Section title="Transform">
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          setSaved(false);
          void save.call(e.currentTarget);
        }}
      >
        <Select
          label="Kind"
          name="kind"
          value={kind}
          onChange={(e) => setKind(e.currentTarget.value)}
          options={[
            ['', 'none: payload delivered as received'],
            ['jsonata', 'JSONata expression (Starter and above)'],
            ['automation', 'Automation, a pinned version (Starter and above)'],
          ]}
        />
        {kind === 'jsonata' ? (
          <TextArea
            label="JSONata expression"
            name="expression"
            defaultValue={transform.expression ?? ''}
            placeholder='{"kind": type, "amount": data.amount}'
            hint="Its input is the event's body parsed as JSON; its result is the payload delivered. Save it, then try it with the probe below."
          />
        ) : null}
        {kind === 'automation' ? (
          <div class="grid">
            <Select
              label="Automation"
              name="automationId"
              defaultValue={transform.automationId ?? ''}
              options={(automations.data ?? []).map((a) => [a.id, `${a.name} (v${a.currentVersion}, ${a.status})`] as [string, string])}
              hint={automations.error ? automations.error.message : automations.data?.length === 0 ? 'No automation yet: create one with the API (POST /v1/automations).' : undefined}
            />
            <Field label="Version" name="version" type="number" min={1} defaultValue={transform.version ?? ''} hint="Empty: the latest, pinned now." />
          </div>
        ) : null}
        <ErrorBanner error={save.error} />
        {saved ? (
          <p class="success-banner" role="status">
            Transform saved.
          </p>
        ) : null}
        <button type="submit" class="primary" disabled={save.pending}>
          Save transform
        </button>
      </form>
    </Section>
  );
}

function Probe({ webhookId }: { webhookId: string }) {
  const [result, setResult] = useState<any>();
  const run = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const data = await gql(
      `mutation($id: ID!, $body: JSON, $headers: JSON, $method: String, $path: String, $contentType: String) {
        testWebhookDelivery(id: $id, body: $body, headers: $headers, method: $method, path: $path, contentType: $contentType) {
          matchedRule { name priority match } destination { id name type config } transformed payload transformError
        }
      }`,
      {
        id: webhookId,
        body: parseJsonField(String(f.get('body')), 'Body'),
        headers: parseJsonField(String(f.get('headers')), 'Headers'),
        method: f.get('method') || undefined,
        path: f.get('path') || undefined,
        contentType: f.get('contentType') || undefined,
      },
    );
    setResult(data.testWebhookDelivery);
  });
  return (
    <Section title="Test delivery">
      <p class="muted">Runs routing and the saved transform against a sample event. Nothing is stored or sent.</p>
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void run.call(e.currentTarget);
        }}
      >
        <div class="grid">
          <Field label="Method" name="method" defaultValue="POST" />
          <Field label="Path" name="path" placeholder="/orders" />
          <Field label="Content type" name="contentType" defaultValue="application/json" />
        </div>
        <TextArea label="Body (JSON)" name="body" defaultValue={'{"type": "order.created", "data": {"amount": 42}}'} />
        <TextArea label="Headers (JSON)" name="headers" placeholder='{"x-event": "order"}' />
        <ErrorBanner error={run.error} />
        <button type="submit" class="primary" disabled={run.pending}>
          Run probe
        </button>
      </form>
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

function Secrets({ webhookId }: { webhookId: string }) {
  const versions = useQuery(() => gql(`query($id: ID!) { webhookSecrets(id: $id) { items { kind version state createdAt expiresAt } } }`, { id: webhookId }).then((d) => d.webhookSecrets.items as any[]), [webhookId]);
  const [shown, setShown] = useState<{ label: string; secret: string; until: string }>();
  const rotate = useAction(async (kind: 'ingest' | 'signing', grace: number) => {
    if (kind === 'ingest') {
      const d = await gql(`mutation($id: ID!, $g: Int) { rotateIngestSecret(id: $id, graceSeconds: $g) { ingestSecret previousExpiresAt } }`, { id: webhookId, g: grace });
      setShown({ label: 'New ingest secret', secret: d.rotateIngestSecret.ingestSecret, until: d.rotateIngestSecret.previousExpiresAt });
    } else {
      const d = await gql(`mutation($id: ID!, $g: Int) { rotateSigningSecret(id: $id, graceSeconds: $g) { signingSecret previousExpiresAt } }`, { id: webhookId, g: grace });
      setShown({ label: 'New signing secret', secret: d.rotateSigningSecret.signingSecret, until: d.rotateSigningSecret.previousExpiresAt });
    }
    versions.reload();
  });
  const [grace, setGrace] = useState('86400');
  return (
    <Section title="Secrets">
      {shown ? (
        <div class="success-banner" role="status">
          <p>
            <strong>{shown.label}</strong> (shown once; copy it now). The previous one stays valid until <Time value={shown.until} />.
          </p>
          <Copyable value={shown.secret} label={shown.label} />
        </div>
      ) : null}
      <div class="row">
        <Field label="Grace period (s)" name="grace" type="number" min={0} value={grace} onInput={(e) => setGrace(e.currentTarget.value)} />
        <ConfirmButton label="Rotate ingest secret" title="Rotate the ingest secret?" body="Producers must switch to the new secret before the grace period ends." onConfirm={() => rotate.call('ingest', Number(grace))} />
        <ConfirmButton label="Rotate signing secret" title="Rotate the signing secret?" body="Deliveries carry signatures by both secrets during the grace period." onConfirm={() => rotate.call('signing', Number(grace))} />
      </div>
      <ErrorBanner error={rotate.error ?? versions.error} />
      {versions.data ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Kind</th>
                <th scope="col">Version</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
              </tr>
            </thead>
            <tbody>
              {versions.data.map((v) => (
                <tr key={`${v.kind}-${v.version}`}>
                  <td>{v.kind}</td>
                  <td>{v.version}</td>
                  <td>
                    <Badge value={v.state} />
                  </td>
                  <td>
                    <Time value={v.createdAt} />
                  </td>
                  <td>
                    <Time value={v.expiresAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </Section>
  );
}

function ProviderPack({ webhookId }: { webhookId: string }) {
  const q = useQuery(
    () => gql(`query($id: ID!) { webhookProvider(id: $id) { provider toleranceSeconds } providers { items { id name secretDescription } } }`, { id: webhookId }),
    [webhookId],
  );
  const [saved, setSaved] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const tolerance = String(f.get('toleranceSeconds') ?? '');
    await gql(`mutation($id: ID!, $provider: String, $secret: String, $tol: Int) { setWebhookProvider(id: $id, provider: $provider, secret: $secret, toleranceSeconds: $tol) { provider } }`, {
      id: webhookId,
      provider: f.get('provider') || null,
      secret: f.get('secret') || undefined,
      tol: tolerance ? Number(tolerance) : null,
    });
    setSaved(true);
    q.reload();
  });
  if (!q.data) return <ErrorBanner error={q.error} />;
  return (
    <Section title="Provider pack">
      <form
        class="stack"
        key={q.data.webhookProvider.provider ?? ''}
        onSubmit={(e) => {
          e.preventDefault();
          setSaved(false);
          void save.call(e.currentTarget);
        }}
      >
        <p class="muted">Ingest also verifies the provider's own signature (Starter and above). The secret is sealed and never shown.</p>
        <div class="grid">
          <Select label="Provider" name="provider" defaultValue={q.data.webhookProvider.provider ?? ''} options={[['', 'none'], ...q.data.providers.items.map((p: any) => [p.id, p.name] as [string, string])]} />
          <Field label="Provider secret" name="secret" type="password" autoComplete="off" hint="Left empty: the stored one is kept." />
          <Field label="Tolerance (s)" name="toleranceSeconds" type="number" min={1} max={86400} defaultValue={q.data.webhookProvider.toleranceSeconds ?? ''} />
        </div>
        <ErrorBanner error={save.error} />
        {saved ? (
          <p class="success-banner" role="status">
            Provider pack saved.
          </p>
        ) : null}
        <button type="submit" class="primary" disabled={save.pending}>
          Save provider pack
        </button>
      </form>
    </Section>
  );
}

const QUOTAS = ['ingest_rate', 'backlog_depth', 'stored_payload_bytes', 'file_storage_bytes', 'replay_volume', 'payload_retention_seconds', 'history_retention_seconds'] as const;

function QuotaOverrides({ webhookId }: { webhookId: string }) {
  const fields = QUOTAS.join(' ');
  const q = useQuery(() => gql(`query($id: ID!) { webhookQuotaOverrides(id: $id) { quotaOverrides { ${fields} } effectiveQuotas { ${fields} } } }`, { id: webhookId }), [webhookId]);
  const [saved, setSaved] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const vars: Record<string, unknown> = { id: webhookId };
    for (const k of QUOTAS) {
      const v = String(f.get(k) ?? '').trim();
      vars[k] = v === '' ? null : Number(v);
    }
    await gql(`mutation($id: ID!, ${QUOTAS.map((k) => `$${k}: SafeInt`).join(', ')}) { setWebhookQuotaOverrides(id: $id, ${QUOTAS.map((k) => `${k}: $${k}`).join(', ')}) { webhookId } }`, vars);
    setSaved(true);
    q.reload();
  });
  if (!q.data) return <ErrorBanner error={q.error} />;
  const o = q.data.webhookQuotaOverrides;
  return (
    <Section title="Quota overrides">
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          setSaved(false);
          void save.call(e.currentTarget);
        }}
      >
        <p class="muted">Tighten the project's limits for this webhook; empty: the project's limit.</p>
        <div class="grid">
          {QUOTAS.map((k) => (
            <Field key={k} label={k.replace(/_/g, ' ')} name={k} type="number" min={0} defaultValue={o.quotaOverrides[k] ?? ''} hint={`In effect: ${o.effectiveQuotas[k]}`} />
          ))}
        </div>
        <ErrorBanner error={save.error} />
        {saved ? (
          <p class="success-banner" role="status">
            Overrides saved.
          </p>
        ) : null}
        <button type="submit" class="primary" disabled={save.pending}>
          Save overrides
        </button>
      </form>
    </Section>
  );
}

interface AllowlistEntry {
  id: string;
  pattern: string;
  createdAt: string;
}

function EmailAllowlist({ webhookId }: { webhookId: string }) {
  const list = usePaged<AllowlistEntry>(
    (cursor) =>
      gql(`query($id: ID!, $cursor: String) { webhookEmailAllowlist(id: $id, limit: 100, cursor: $cursor) { items { id pattern createdAt } nextCursor } }`, { id: webhookId, cursor }).then(
        (d) => d.webhookEmailAllowlist,
      ),
    [webhookId],
  );
  const add = useAction(async (form: HTMLFormElement) => {
    const pattern = String(new FormData(form).get('pattern') ?? '').trim();
    await gql(`mutation($id: ID!, $pattern: String!) { addEmailAllowlistEntry(id: $id, pattern: $pattern) { id } }`, { id: webhookId, pattern });
    form.reset();
    list.reload();
  });
  const remove = useAction(async (entryId: string) => {
    await gql(`mutation($id: ID!, $entryId: ID!) { deleteEmailAllowlistEntry(id: $id, entryId: $entryId) { id deleted } }`, { id: webhookId, entryId });
    list.reload();
  });
  return (
    <Section title="Email sender allowlist">
      <p class="muted">
        Senders the email address takes, matched case-insensitively against the From: address (else MAIL FROM): an address (ana@example.com), a domain (example.com, not its subdomains) or a local part on any domain
        (alerts@*). Empty: every sender. Mail from any other sender is accepted and dropped. Changes need Starter and above.
      </p>
      <ErrorBanner error={list.error ?? remove.error} />
      {!list.loading && !list.error && list.items.length === 0 ? <Empty title="No sender patterns">Every sender is taken. Add a pattern to take only those senders.</Empty> : null}
      {list.items.length ? (
        <div class="table-wrap">
          <table aria-label="Sender patterns">
            <thead>
              <tr>
                <th scope="col">Pattern</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((e) => (
                <tr key={e.id} data-entry-id={e.id}>
                  <td>
                    <code>{e.pattern}</code>
                  </td>
                  <td>
                    <Time value={e.createdAt} />
                  </td>
                  <td>
                    <ConfirmButton label="Delete" danger small title={`Remove sender pattern ${e.pattern}?`} body="The next mail sees the change." onConfirm={() => remove.call(e.id)} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      <LoadMore cursor={list.cursor} onMore={() => void list.loadMore()} pending={list.pending} />
      <form
        class="stack"
        onSubmit={(e) => {
          e.preventDefault();
          void add.call(e.currentTarget);
        }}
      >
        <div class="row">
          <Field label="Sender pattern" name="pattern" required maxLength={254} autoComplete="off" placeholder="alerts@example.com" hint="At most 254 characters, no spaces, at most one @." />
        </div>
        <ErrorBanner error={add.error} />
        <div class="row">
          <button type="submit" class="primary" disabled={add.pending}>
            Add sender
          </button>
        </div>
      </form>
    </Section>
  );
}

function BrowserForms({ webhook, onSaved }: { webhook: Webhook; onSaved: (w: Webhook) => void }) {
  const [saved, setSaved] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const origins = String(f.get('formAllowedOrigins') ?? '')
      .split(/[\s,]+/)
      .filter(Boolean);
    const data = await gql<{ updateWebhook: Webhook }>(
      `mutation($id: ID!, $formAccess: String, $formAllowedOrigins: [String!]) { updateWebhook(id: $id, formAccess: $formAccess, formAllowedOrigins: $formAllowedOrigins) { ${WEBHOOK} } }`,
      { id: webhook.id, formAccess: f.get('formAccess'), formAllowedOrigins: origins.length ? origins : ['*'] },
    );
    onSaved(data.updateWebhook);
    setSaved(true);
  });
  return (
    <Section title="Browser forms">
      <form
        class="stack"
        key={webhook.updatedAt}
        onSubmit={(e) => {
          e.preventDefault();
          setSaved(false);
          void save.call(e.currentTarget);
        }}
      >
        <p class="muted">
          How a browser posts to the form ingest URL <code>{webhook.formIngestUrl}</code>. A post from an origin not listed is refused (403 origin_not_allowed); requests without an Origin (not a browser) are not subject to the list.
        </p>
        <Select
          label="Form access"
          name="formAccess"
          defaultValue={webhook.formAccess}
          options={[
            ['secret', 'secret: the ingest secret is required (_secret field, header or signature)'],
            ['public', 'public: no secret, the URL is the credential'],
          ]}
        />
        <TextArea
          label="Allowed origins"
          name="formAllowedOrigins"
          rows={3}
          defaultValue={webhook.formAllowedOrigins.join('\n')}
          placeholder="https://www.example.com"
          hint="One a line: * (any origin) or exact origins, scheme://host[:port] with no path and no trailing slash. Empty: *."
        />
        <ErrorBanner error={save.error} />
        {saved ? (
          <p class="success-banner" role="status">
            Form settings saved.
          </p>
        ) : null}
        <div class="row">
          <button type="submit" class="primary" disabled={save.pending}>
            Save form settings
          </button>
        </div>
      </form>
    </Section>
  );
}

export default function WebhookPage({ params }: { params: Record<string, string | undefined> }) {
  const id = params.id!;
  const q = useQuery(
    () =>
      gql(
        `query($id: ID!) {
          webhook(id: $id) { ${WEBHOOK} }
          webhookDestinations(id: $id) { items { id name type config isDefault hasCredentials listenerConnected } }
          webhookRouting(id: $id) { rules { name priority destinationId match } }
          webhookTransform(id: $id) { kind expression automationId version }
        }`,
        { id },
      ),
    [id],
  );
  if (q.error) return <Page title="Webhook"><ErrorBanner error={q.error} /><Link href="/webhooks">Back to webhooks</Link></Page>;
  if (!q.data) return <Loading />;
  const w: Webhook = q.data.webhook;
  const setWebhook = (next?: Webhook) => (next ? q.setData((d: any) => ({ ...d, webhook: next })) : q.reload());
  return (
    <Page
      title={w.name || w.id}
      actions={
        <>
          <Badge value={w.status} />
          <Link class="button" href={`/deliveries?webhookId=${w.id}`}>
            Deliveries
          </Link>
          <Link class="button" href={`/schedules?webhookId=${w.id}`}>
            Schedules
          </Link>
          <Link class="button" href={`/metrics?webhookId=${w.id}`}>
            Metrics
          </Link>
        </>
      }
    >
      <nav class="toc" aria-label="On this page">
        {['Addresses and lifecycle', 'Settings', 'Destinations', 'Routing rules', 'Transform', 'Test delivery', 'Secrets', 'Provider pack', 'Quota overrides', 'Email sender allowlist', 'Browser forms'].map((t) => (
          <a key={t} href={`#${slug(t)}`}>
            {t}
          </a>
        ))}
      </nav>
      <Section title="Addresses and lifecycle">
        <dl class="facts">
          <dt>Id</dt>
          <dd>
            <code>{w.id}</code>
          </dd>
          <dt>Ingest URL</dt>
          <dd>
            <Copyable value={w.ingestUrl} label="Ingest URL" />
          </dd>
          <dt>Form ingest URL</dt>
          <dd>
            <code>{w.formIngestUrl}</code>
          </dd>
          <dt>Email address</dt>
          <dd>
            <code>{w.emailIngestAddress}</code>
          </dd>
          <dt>Created</dt>
          <dd>
            <Time value={w.createdAt} />
          </dd>
        </dl>
        <details>
          <summary>Send a test event with curl</summary>
          <pre class="code">{curlExample(w.ingestUrl)}</pre>
        </details>
        <h3>Lifecycle</h3>
        <Lifecycle webhook={w} onChange={setWebhook} />
      </Section>
      <Settings webhook={w} onSaved={setWebhook} />
      <Destinations webhookId={id} destinations={q.data.webhookDestinations.items} onChange={q.reload} />
      <Routing key={JSON.stringify(q.data.webhookRouting.rules)} webhookId={id} rules={q.data.webhookRouting.rules} destinations={q.data.webhookDestinations.items} />
      <Transform webhookId={id} transform={q.data.webhookTransform} />
      <Probe webhookId={id} />
      <Secrets webhookId={id} />
      <ProviderPack webhookId={id} />
      <QuotaOverrides webhookId={id} />
      <EmailAllowlist webhookId={id} />
      <BrowserForms webhook={w} onSaved={setWebhook} />
    </Page>
  );
}
