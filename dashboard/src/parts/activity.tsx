// Each listed webhook's last 24 hours at a glance: per hour, events ingested and deliveries failed
// (in red), from its metrics roll-ups (`metrics(window: "24h")`, 15-minute buckets summed by hour),
// read in one GraphQL document for the whole page.
import { gql } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { useQuery } from '../ui.tsx';

const HOURS = 24;

export interface Activity {
  buckets: { total: number; failed: number }[];
  total: number;
  failed: number;
  capped: boolean;
}

const ACTIVITY = graphql(`fragment WebhookActivity on Webhook @_unmask { metrics(window: "24h") { to series { t ingested succeeded failed } } }`);


export function useActivity(webhookIds: string[]) {
  const key = webhookIds.join(',');
  return useQuery(async () => {
    if (!webhookIds.length) return new Map<string, Activity>();
    // One aliased field per webhook (the aliases are made here; the fields are the fragment's).
    const fields = webhookIds.map((id, i) => `w${i}: webhook(id: ${JSON.stringify(id)}) { ...WebhookActivity }`);
    const data = (await gql(graphql(`{ ${fields.join('\n')} }`, [ACTIVITY]))) as Record<string, ResultOf<typeof ACTIVITY>>;
    const out = new Map<string, Activity>();
    webhookIds.forEach((id, i) => {
      const { to, series } = data[`w${i}`].metrics;
      const end = new Date(to).getTime();
      const buckets = Array.from({ length: HOURS }, () => ({ total: 0, failed: 0 }));
      let total = 0;
      let failed = 0;
      for (const p of series) {
        const age = Math.floor((end - new Date(p.t).getTime()) / 3600_000);
        const b = buckets[HOURS - 1 - Math.min(HOURS - 1, Math.max(0, age))];
        b.total += Math.max(p.ingested, p.succeeded + p.failed);
        b.failed += p.failed;
        total += p.ingested;
        failed += p.failed;
      }
      out.set(id, { buckets, total, failed, capped: false });
    });
    return out;
  }, [key]);
}

/** Bars per hour, oldest on the left; the label says it in words. */
export function Sparkline({ activity }: { activity: Activity | undefined }) {
  if (!activity) return <span class="muted">…</span>;
  const max = Math.max(1, ...activity.buckets.map((b) => b.total));
  const label = `${activity.total}${activity.capped ? '+' : ''} events in the last 24 hours, ${activity.failed} deliveries failed`;
  const w = 4;
  return (
    <span class="sparkline">
      <svg width={HOURS * w} height={24} viewBox={`0 0 ${HOURS * w} 24`} role="img" aria-label={label}>
        <title>{label}</title>
        <line x1={0} y1={23.5} x2={HOURS * w} y2={23.5} stroke="#d9dee6" />
        {activity.buckets.map((b, i) => {
          const h = b.total ? Math.max(2, (b.total / max) * 22) : 0;
          const hf = b.total ? (b.failed / b.total) * h : 0;
          return (
            <g key={i}>
              <rect x={i * w} y={24 - h} width={w - 1} height={h - hf} fill="#2f5bd3" />
              {hf ? <rect x={i * w} y={24 - hf} width={w - 1} height={hf} fill="#b42318" /> : null}
            </g>
          );
        })}
      </svg>
      <small class="muted">
        {activity.total}
        {activity.capped ? '+' : ''}
        {activity.failed ? `, ${activity.failed} failed` : ''}
      </small>
    </span>
  );
}
