// Usage against quotas: the project's tier, limits, this month's usage and the last 30 days.
import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { ActionForm, ErrorBanner, Field, formText, Loading, Page, Section, Table, useAction, useQuery } from '../ui.tsx';

const GAUGES = ['monthly_deliveries', 'backlog_depth', 'stored_payload_bytes', 'file_storage_bytes', 'replay_volume'] as const;
const LIMITS = ['ingest_rate', 'payload_retention_seconds', 'history_retention_seconds'] as const;

function fmt(key: string, n: number) {
  if (key.endsWith('_bytes')) return n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`;
  if (key.endsWith('_seconds')) return n % 86400 === 0 ? `${n / 86400} days` : `${n} s`;
  return n.toLocaleString();
}

export default function UsagePage() {
  const [range] = useState(() => {
    const to = new Date();
    return { from: new Date(to.getTime() - 30 * 86400_000).toISOString(), to: to.toISOString() };
  });
  const q = useQuery(
    () =>
      gql(graphql(`query($from: String!, $to: String!) {
        project { id name tier overageEnabled quotas { monthly_deliveries backlog_depth stored_payload_bytes file_storage_bytes replay_volume ingest_rate payload_retention_seconds history_retention_seconds } usage { month monthly_deliveries backlog_depth stored_payload_bytes file_storage_bytes replay_volume } }
        usage(from: $from, to: $to) { totals { deliveries replays } days { date deliveries replays } }
      }`), range),
    [],
  );
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const d = await gql(graphql(`mutation($name: String, $overage: Boolean) { updateProject(name: $name, overageEnabled: $overage) { id name tier overageEnabled } }`), {
      name: formText(f, 'name'),
      overage: f.get('overage') === 'on',
    });
    q.setData((prev) => prev && { ...prev, project: { ...prev.project, ...d.updateProject } });
  });
  if (q.error) return <Page title="Usage & quotas"><ErrorBanner error={q.error} /></Page>;
  if (!q.data) return <Loading />;
  const p = q.data.project;
  const max = Math.max(1, ...q.data.usage.days.map((d) => d.deliveries));
  return (
    <Page title="Usage & quotas">
      <Section title={`Project “${p.name}” — ${p.tier} tier`}>
        <ActionForm action={save} submit="Save" class="row">
          <Field label="Project name" name="name" defaultValue={p.name} />
          <label class="row">
            <input type="checkbox" name="overage" defaultChecked={p.overageEnabled} /> Allow monthly-delivery overage (paid tiers)
          </label>
        </ActionForm>
      </Section>
      <Section title={`This month (${p.usage.month})`}>
        <div class="stack">
          {GAUGES.map((k) => {
            const used = p.usage[k];
            const limit = p.quotas[k];
            const pct = limit ? Math.min(100, (used / limit) * 100) : 0;
            return (
              <div key={k} class="field">
                <label for={`m-${k}`}>
                  {k.replace(/_/g, ' ')}: {fmt(k, used)} of {fmt(k, limit)}
                </label>
                <meter id={`m-${k}`} min={0} max={100} low={70} high={90} optimum={0} value={pct}>
                  {pct.toFixed(0)}%
                </meter>
              </div>
            );
          })}
        </div>
        <dl class="facts">
          {LIMITS.map((k) => (
            <>
              <dt>{k.replace(/_/g, ' ')}</dt>
              <dd>{fmt(k, p.quotas[k])}</dd>
            </>
          ))}
        </dl>
      </Section>
      <Section title="Last 30 days">
        <p>
          {q.data.usage.totals.deliveries.toLocaleString()} deliveries, {q.data.usage.totals.replays.toLocaleString()} replays.
        </p>
        {q.data.usage.days.length === 0 ? <p class="muted">No deliveries in this period yet.</p> : null}
        <Table
          label="Deliveries per day"
          columns={['Day', 'Deliveries', 'Replays']}
          items={q.data.usage.days}
          row={(d) => (
            <tr key={d.date}>
              <td>{d.date}</td>
              <td>
                <meter min={0} max={max} value={d.deliveries} aria-label={`${d.deliveries} deliveries`} /> {d.deliveries.toLocaleString()}
              </td>
              <td>{d.replays.toLocaleString()}</td>
            </tr>
          )}
        />
      </Section>
    </Page>
  );
}
