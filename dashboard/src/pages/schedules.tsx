// Schedules of a webhook (Starter and above): create, edit, enable/disable, fire now, delete.
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { ActionForm, Badge, ConfirmButton, Empty, ErrorBanner, Field, formText, Page, PagedCards, parseJsonField, Section, TextArea, Time, useAction, usePaged } from '../ui.tsx';
import { WebhookSelect, useWebhookNames } from '../parts/webhook-select.tsx';

const FIELDS = graphql(`fragment ScheduleFields on Schedule @_unmask { id name cron timezone enabled payload headers contentType nextRunAt lastRunAt lastStatus lastEventId skippedCount updatedAt }`);

function scheduleVars(form: HTMLFormElement) {
  const f = new FormData(form);
  return {
    name: formText(f, 'name'),
    cron: formText(f, 'cron'),
    timezone: formText(f, 'timezone'),
    contentType: formText(f, 'contentType'),
    payload: parseJsonField(String(f.get('payload') ?? ''), 'Payload'),
    headers: parseJsonField(String(f.get('headers') ?? ''), 'Headers'),
    enabled: f.get('enabled') === 'on',
  };
}

type Schedule = ResultOf<typeof FIELDS>;

function ScheduleFields({ s }: { s?: Schedule }) {
  return (
    <>
      <div class="grid">
        <Field label="Name" name="name" defaultValue={s?.name ?? ''} placeholder="nightly-report" />
        <Field label="Cron" name="cron" required defaultValue={s?.cron ?? ''} placeholder="0 3 * * *" hint="Five fields, or six with seconds first." />
        <Field label="Time zone" name="timezone" defaultValue={s?.timezone ?? Intl.DateTimeFormat().resolvedOptions().timeZone} hint="IANA name, e.g. Europe/Paris." />
        <Field label="Content type" name="contentType" defaultValue={s?.contentType ?? 'application/json'} />
      </div>
      <TextArea label="Payload (JSON)" name="payload" defaultValue={s ? JSON.stringify(s.payload, null, 2) : '{}'} />
      <TextArea label="Headers (JSON)" name="headers" defaultValue={s ? JSON.stringify(s.headers, null, 2) : ''} placeholder='{"x-job": "report"}' />
      <label class="row">
        <input type="checkbox" name="enabled" defaultChecked={s ? s.enabled : true} /> Enabled
      </label>
    </>
  );
}

function ScheduleCard({ webhookId, s, onChange }: { webhookId: string; s: Schedule; onChange: () => void }) {
  const [editing, setEditing] = useState(false);
  const [note, setNote] = useState<string>();
  const save = useAction(async (form: HTMLFormElement) => {
    await gql(
      graphql(`mutation($id: ID!, $scheduleId: ID!, $name: String, $cron: String, $timezone: String, $contentType: String, $payload: JSON, $headers: JSON, $enabled: Boolean) {
        updateSchedule(id: $id, scheduleId: $scheduleId, name: $name, cron: $cron, timezone: $timezone, contentType: $contentType, payload: $payload, headers: $headers, enabled: $enabled) { id }
      }`),
      { id: webhookId, scheduleId: s.id, ...scheduleVars(form) },
    );
    setEditing(false);
    onChange();
  });
  const trigger = useAction(async () => {
    const d = await gql(graphql(`mutation($id: ID!, $scheduleId: ID!) { triggerSchedule(id: $id, scheduleId: $scheduleId) { eventId deliveryId status } }`), { id: webhookId, scheduleId: s.id });
    setNote(`Fired: event ${d.triggerSchedule.eventId} (${d.triggerSchedule.status}).`);
    onChange();
  });
  const remove = useAction(async () => {
    await gql(graphql(`mutation($id: ID!, $scheduleId: ID!) { deleteSchedule(id: $id, scheduleId: $scheduleId) { id } }`), { id: webhookId, scheduleId: s.id });
    onChange();
  });
  return (
    <li class="card">
      <div class="card-header">
        <h3>{s.name || s.id}</h3>
        <Badge value={s.enabled ? 'enabled' : 'paused'} />
        <code>{s.cron}</code>
        <span class="muted">{s.timezone}</span>
        <div class="row">
          <button type="button" class="small" onClick={() => trigger.call()} disabled={trigger.pending}>
            Fire now
          </button>
          <button type="button" class="small" aria-expanded={editing} onClick={() => setEditing(!editing)}>
            {editing ? 'Cancel' : 'Edit'}
          </button>
          <ConfirmButton label="Delete" danger title={`Delete schedule ${s.name || s.id}?`} body="Its planned tick is dropped." onConfirm={() => remove.call()} />
        </div>
      </div>
      <dl class="facts">
        <dt>Next tick</dt>
        <dd>
          <Time value={s.nextRunAt} />
        </dd>
        <dt>Last tick</dt>
        <dd>
          <Time value={s.lastRunAt} /> {s.lastStatus ? <Badge value={s.lastStatus} /> : null}{' '}
          {s.lastEventId ? <Link href={`/deliveries?eventId=${s.lastEventId}`}>deliveries</Link> : null}
        </dd>
        <dt>Skipped ticks</dt>
        <dd>{s.skippedCount}</dd>
      </dl>
      {note ? (
        <p class="success-banner" role="status">
          {note}
        </p>
      ) : null}
      {editing ? (
        <ActionForm action={save} submit="Save schedule">
          <ScheduleFields s={s} />
        </ActionForm>
      ) : null}
      <ErrorBanner error={trigger.error ?? remove.error} />
    </li>
  );
}

export default function SchedulesPage() {
  const [, navigate] = useLocation();
  const hooks = useWebhookNames();
  const search = new URLSearchParams(useSearch());
  const webhookId = search.get('webhookId') ?? hooks.data?.[0]?.id ?? '';
  const list = usePaged(
    (cursor) => (webhookId ? gql(graphql(`query($id: ID!, $cursor: String) { webhookSchedules(id: $id, limit: 50, cursor: $cursor) { items { ...ScheduleFields } nextCursor } }`, [FIELDS]), { id: webhookId, cursor }).then((d) => d.webhookSchedules) : Promise.resolve({ items: [], nextCursor: null })),
    [webhookId],
  );
  const create = useAction(async (form: HTMLFormElement) => {
    await gql(
      graphql(`mutation($id: ID!, $name: String, $cron: String, $timezone: String, $contentType: String, $payload: JSON, $headers: JSON, $enabled: Boolean) {
        createSchedule(id: $id, name: $name, cron: $cron, timezone: $timezone, contentType: $contentType, payload: $payload, headers: $headers, enabled: $enabled) { id }
      }`),
      { id: webhookId, ...scheduleVars(form) },
    );
    form.reset();
    list.reload();
  });
  if (hooks.data && hooks.data.length === 0) {
    return (
      <Page title="Schedules">
        <Empty title="No webhook to schedule">
          <p>
            A schedule sends an event to a webhook on a cron. <Link href="/webhooks">Create a webhook</Link> first.
          </p>
        </Empty>
      </Page>
    );
  }
  return (
    <Page title="Schedules">
      <div class="filters">
        <WebhookSelect value={webhookId} allLabel={null} onChange={(v) => navigate(`/schedules?webhookId=${v}`, { replace: true })} />
      </div>
      <PagedCards
        list={list}
        error={hooks.error}
        empty={webhookId ? <Empty title="No schedules on this webhook">Add one below: each tick becomes an event of the webhook, delivered like any other.</Empty> : null}
        card={(s) => <ScheduleCard key={`${s.id}-${s.updatedAt}`} webhookId={webhookId} s={s} onChange={list.reload} />}
      />
      {webhookId ? (
        <Section title="New schedule">
          <ActionForm action={create} submit="Create schedule">
            <ScheduleFields />
          </ActionForm>
        </Section>
      ) : null}
    </Page>
  );
}
