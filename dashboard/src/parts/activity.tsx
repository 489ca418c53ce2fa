// Each listed webhook's last 24 hours at a glance: deliveries per hour (failed ones in red), from
// its latest 100 deliveries of the period, read in one GraphQL document for the whole page.
import { gql } from '../api.ts';
import { useQuery } from '../ui.tsx';

const HOURS = 24;
const SAMPLE = 100;

export interface Activity {
  buckets: { total: number; failed: number }[];
  total: number;
  failed: number;
  capped: boolean;
}

export function useActivity(webhookIds: string[]) {
  const key = webhookIds.join(',');
  return useQuery(async () => {
    if (!webhookIds.length) return new Map<string, Activity>();
    const now = Date.now();
    const from = new Date(now - HOURS * 3600_000).toISOString();
    const fields = webhookIds.map((id, i) => `w${i}: webhookDeliveries(id: ${JSON.stringify(id)}, from: $from, limit: ${SAMPLE}) { items { status createdAt } nextCursor }`);
    const data = await gql<Record<string, { items: { status: string; createdAt: string }[]; nextCursor: string | null }>>(`query($from: String) { ${fields.join('\n')} }`, { from });
    const out = new Map<string, Activity>();
    webhookIds.forEach((id, i) => {
      const page = data[`w${i}`];
      const buckets = Array.from({ length: HOURS }, () => ({ total: 0, failed: 0 }));
      let failed = 0;
      for (const d of page.items) {
        const age = Math.floor((now - new Date(d.createdAt).getTime()) / 3600_000);
        const b = buckets[HOURS - 1 - Math.min(HOURS - 1, Math.max(0, age))];
        b.total++;
        if (d.status === 'failed') {
          b.failed++;
          failed++;
        }
      }
      out.set(id, { buckets, total: page.items.length, failed, capped: page.nextCursor !== null });
    });
    return out;
  }, [key]);
}

/** Bars per hour, oldest on the left; the label says it in words. */
export function Sparkline({ activity }: { activity: Activity | undefined }) {
  if (!activity) return <span class="muted">…</span>;
  const max = Math.max(1, ...activity.buckets.map((b) => b.total));
  const label = `${activity.total}${activity.capped ? '+' : ''} deliveries in the last 24 hours, ${activity.failed} failed`;
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
