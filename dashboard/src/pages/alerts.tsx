// Operator alerting (CONTRACT §9, Pro and above): alert rules (condition, channels, cooldown),
// and the dispatch history (each firing and resolution, with what each channel answered).
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { ApiError, gql } from '../api.ts';
import { graphql, json, toJson, type ResultOf } from '../graphql.ts';
import { ActionForm, Badge, ConfirmButton, Copyable, CreateToggle, Empty, ErrorBanner, Field, Page, PagedCards, PagedTable, RefreshButton, Section, Select, TextArea, Time, useAction, usePaged } from '../ui.tsx';
import { useWebhookNames } from '../parts/webhook-select.tsx';

const RULE_FIELDS = graphql(`fragment AlertRuleFields on AlertRule @_unmask { id name webhookId enabled state lastValue lastFiredAt cooldownSeconds channels condition { type threshold windowSeconds } createdAt updatedAt }`);
const CONDITIONS: [string, string][] = [
  ['failure_rate', 'Failure rate (fraction 0..1 over the window)'],
  ['consecutive_failures', 'Consecutive failed deliveries'],
  ['dlq_added', 'Entries added to the DLQ over the window'],
  ['backlog_depth', 'Backlog depth (pending deliveries)'],
];
const WINDOWED = new Set(['failure_rate', 'dlq_added']);

type Rule = ResultOf<typeof RULE_FIELDS>;

/** One channel of a dispatch, as the API records it. */
interface DispatchChannel {
  type: string;
  target: string;
  status: string;
  error?: string;
}

interface Channel {
  type: 'webhook' | 'email';
  url?: string;
  to?: string;
}

const lines = (v: FormDataEntryValue | null) =>
  String(v ?? '')
    .split(/[\s,]+/)
    .filter(Boolean);

function ruleVars(form: HTMLFormElement) {
  const f = new FormData(form);
  const channels: Channel[] = [...lines(f.get('webhookUrls')).map((url) => ({ type: 'webhook' as const, url })), ...lines(f.get('emails')).map((to) => ({ type: 'email' as const, to }))];
  const threshold = Number(f.get('threshold'));
  if (String(f.get('threshold') ?? '').trim() === '' || !Number.isFinite(threshold)) throw new ApiError('Threshold must be a number.', 'invalid_request');
  const windowSeconds = Number(f.get('windowMinutes') || 5) * 60;
  const cooldown = String(f.get('cooldownMinutes') ?? '').trim();
  return {
    name: String(f.get('name') ?? '') || undefined,
    webhookId: String(f.get('webhookId') ?? '') || null,
    condition: toJson({ type: String(f.get('type')), threshold, windowSeconds }),
    channels: toJson(channels),
    cooldownSeconds: cooldown === '' ? undefined : Math.round(Number(cooldown) * 60),
    enabled: f.get('enabled') === 'on',
  };
}

function RuleFields({ r }: { r?: Rule }) {
  const hooks = useWebhookNames();
  const [type, setType] = useState<string>(r?.condition.type ?? 'failure_rate');
  const channels = r ? json<Channel[]>(r.channels) : [];
  return (
    <>
      <div class="grid">
        <Field label="Name" name="name" required defaultValue={r?.name ?? ''} placeholder="Orders failing" />
        <Select label="Webhook" name="webhookId" defaultValue={r?.webhookId ?? ''} options={[['', 'Every webhook'], ...(hooks.data ?? []).map((w): [string, string] => [w.id, w.name || w.id])]} />
        <Select label="Condition" name="type" value={type} onChange={(e) => setType(e.currentTarget.value)} options={CONDITIONS} />
        <Field label="Threshold" name="threshold" type="number" step="any" min={0} max={type === 'failure_rate' ? 1 : undefined} required defaultValue={r ? String(r.condition.threshold) : type === 'failure_rate' ? '0.5' : '10'} hint={type === 'failure_rate' ? 'A fraction: 0.5 is half of the finished deliveries.' : 'Fires when the value reaches it.'} />
        <Field label="Window (minutes)" name="windowMinutes" type="number" min={1} max={1440} disabled={!WINDOWED.has(type)} defaultValue={String((r?.condition.windowSeconds ?? 300) / 60)} hint="Look-back of failure rate and DLQ additions (1..1440)." />
        <Field label="Cooldown (minutes)" name="cooldownMinutes" type="number" min={0} defaultValue={String((r?.cooldownSeconds ?? 3600) / 60)} hint="At most one firing per cooldown." />
      </div>
      <div class="grid">
        <TextArea label="Webhook channels (URLs)" name="webhookUrls" rows={2} defaultValue={channels.filter((c) => c.type === 'webhook').map((c) => c.url).join('\n')} placeholder="https://ops.example.com/alerts" hint="One per line; signed with the rule's secret." />
        <TextArea label="Email channels" name="emails" rows={2} defaultValue={channels.filter((c) => c.type === 'email').map((c) => c.to).join('\n')} placeholder="oncall@example.com" hint="One address per line." />
      </div>
      <label class="row">
        <input type="checkbox" name="enabled" defaultChecked={r ? r.enabled : true} /> Enabled
      </label>
    </>
  );
}

function describe(c: { type: string; threshold: number; windowSeconds: number }) {
  const w = WINDOWED.has(c.type) ? ` over ${c.windowSeconds / 60} min` : '';
  return `${c.type} ≥ ${c.threshold}${w}`;
}

function RuleCard({ r, webhookName, onChange }: { r: Rule; webhookName: string; onChange: () => void }) {
  const [editing, setEditing] = useState(false);
  const save = useAction(async (form: HTMLFormElement) => {
    await gql(
      graphql(`mutation($id: ID!, $name: String, $webhookId: String, $condition: JSON, $channels: JSON, $cooldownSeconds: Int, $enabled: Boolean) { updateAlertRule(id: $id, name: $name, webhookId: $webhookId, condition: $condition, channels: $channels, cooldownSeconds: $cooldownSeconds, enabled: $enabled) { id } }`),
      { id: r.id, ...ruleVars(form) },
    );
    setEditing(false);
    onChange();
  });
  const remove = useAction(async () => {
    await gql(graphql(`mutation($id: ID!) { deleteAlertRule(id: $id) { id } }`), { id: r.id });
    onChange();
  });
  return (
    <li class="card" data-rule-id={r.id}>
      <div class="card-header">
        <h3>{r.name}</h3>
        <Badge value={r.enabled ? r.state : 'disabled'} />
        <div class="row">
          <Link class="button small" href={`/alerts?ruleId=${r.id}#dispatch-history`}>
            History
          </Link>
          <button type="button" class="small" aria-expanded={editing} onClick={() => setEditing(!editing)}>
            {editing ? 'Cancel' : 'Edit'}
          </button>
          <ConfirmButton small label="Delete" danger title={`Delete alert rule “${r.name}”?`} body="It stops being evaluated; its dispatch history stays." onConfirm={() => remove.call()} />
        </div>
      </div>
      <dl class="facts">
        <dt>Condition</dt>
        <dd>
          <code>{describe(r.condition)}</code> on {webhookName}
        </dd>
        <dt>Channels</dt>
        <dd>{json<Channel[]>(r.channels).map((c) => `${c.type}: ${c.url ?? c.to}`).join(', ') || '—'}</dd>
        <dt>Cooldown</dt>
        <dd>{r.cooldownSeconds / 60} min</dd>
        <dt>Last value</dt>
        <dd>{r.lastValue ?? '—'}</dd>
        <dt>Last fired</dt>
        <dd>
          <Time value={r.lastFiredAt} />
        </dd>
      </dl>
      {editing ? (
        <ActionForm action={save} submit="Save rule">
          <RuleFields r={r} />
        </ActionForm>
      ) : null}
      <ErrorBanner error={remove.error} />
    </li>
  );
}

function History({ rules }: { rules: Rule[] }) {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const ruleId = search.get('ruleId') ?? '';
  const state = search.get('state') ?? '';
  const go = (r: string, s: string) => navigate(`/alerts?${new URLSearchParams({ ...(r ? { ruleId: r } : {}), ...(s ? { state: s } : {}) })}`, { replace: true });
  const list = usePaged(
    (cursor) =>
      gql(graphql(`query($cursor: String, $ruleId: String, $state: String) { alertDispatches(limit: 50, cursor: $cursor, ruleId: $ruleId, state: $state) { items { id ruleId state value channels createdAt } nextCursor } }`), {
        cursor,
        ruleId: ruleId || undefined,
        state: state || undefined,
      }).then((d) => d.alertDispatches),
    [ruleId, state],
  );
  const names = new Map(rules.map((r) => [r.id, r.name]));
  return (
    <Section title="Dispatch history" actions={<RefreshButton list={list} />}>
      <div class="filters">
        <Select label="Rule" name="ruleId" value={ruleId} onChange={(e) => go(e.currentTarget.value, state)} options={[['', 'All rules'], ...rules.map((r): [string, string] => [r.id, r.name]), ...(ruleId && !names.has(ruleId) ? [[ruleId, ruleId] as [string, string]] : [])]} />
        <Select
          label="State"
          name="state"
          value={state}
          onChange={(e) => go(ruleId, e.currentTarget.value)}
          options={[
            ['', 'Firing and resolved'],
            ['firing', 'firing'],
            ['resolved', 'resolved'],
          ]}
        />
      </div>
      <PagedTable
        list={list}
        label="Dispatches"
        columns={['When', 'Rule', 'State', 'Value', 'Channels']}
        empty={<Empty title="No dispatches">A dispatch is recorded each time a rule fires or resolves.</Empty>}
        row={(d) => (
          <tr key={d.id}>
            <td>
              <Time value={d.createdAt} />
            </td>
            <td>{names.get(d.ruleId) ?? d.ruleId}</td>
            <td>
              <Badge value={d.state} />
            </td>
            <td>{d.value}</td>
            <td>
              <ul class="plain">
                {json<DispatchChannel[]>(d.channels).map((c, i) => (
                  <li key={i}>
                    {c.type} {c.target}: <Badge value={c.status} /> {c.error ? <span class="error-text">{c.error}</span> : null}
                  </li>
                ))}
              </ul>
            </td>
          </tr>
        )}
      />
    </Section>
  );
}

export default function AlertsPage() {
  const hooks = useWebhookNames();
  const rules = usePaged((cursor) => gql(graphql(`query($cursor: String) { alertRules(limit: 100, cursor: $cursor) { items { ...AlertRuleFields } nextCursor } }`, [RULE_FIELDS]), { cursor }).then((d) => d.alertRules), []);
  const [creating, setCreating] = useState(false);
  const [created, setCreated] = useState<{ name: string; secret: string }>();
  const create = useAction(async (form: HTMLFormElement) => {
    const d = await gql(
      graphql(`mutation($name: String, $webhookId: String, $condition: JSON, $channels: JSON, $cooldownSeconds: Int, $enabled: Boolean) { createAlertRule(name: $name, webhookId: $webhookId, condition: $condition, channels: $channels, cooldownSeconds: $cooldownSeconds, enabled: $enabled) { id name signingSecret } }`),
      ruleVars(form),
    );
    setCreated({ name: d.createAlertRule.name, secret: d.createAlertRule.signingSecret });
    setCreating(false);
    rules.reload();
  });
  const hookName = (id: string | null) => (id ? (hooks.data?.find((w) => w.id === id)?.name ?? id) : 'every webhook');
  return (
    <Page
      title="Alerts"
      actions={<CreateToggle open={creating} onToggle={setCreating} label="New alert rule" />}
    >
      {created ? (
        <div class="success-banner" role="status">
          <p>
            Alert rule “{created.name}” created. Its webhook channels are signed with this secret, <strong>shown only once</strong>:
          </p>
          <Copyable value={created.secret} label="Alert signing secret" />
        </div>
      ) : null}
      {creating ? (
        <Section title="New alert rule">
          <ActionForm action={create} submit="Create alert rule">
            <RuleFields />
          </ActionForm>
        </Section>
      ) : null}
      <PagedCards
        list={rules}
        empty={<Empty title="No alert rules">Add one with “New alert rule”: e.g. a failure rate of 0.5 over 5 minutes, sent to an on-call address.</Empty>}
        card={(r) => <RuleCard key={`${r.id}-${r.updatedAt}`} r={r} webhookName={hookName(r.webhookId)} onChange={rules.reload} />}
      />
      {rules.error ? null : <History rules={rules.items} />}
    </Page>
  );
}
