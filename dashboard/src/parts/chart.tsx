// Small inline SVG charts (no chart library): stacked bars per bucket and a depth line. Each has a
// text label saying what it shows, for screen readers and as its tooltip.

export interface Stack {
  t: string;
  parts: { value: number; color: string; name: string }[];
}

const W = 600;
const H = 120;

function tick(t: string, bucketSeconds: number) {
  const d = new Date(t);
  if (bucketSeconds >= 21_600) return d.toLocaleDateString();
  if (bucketSeconds >= 900) return d.toLocaleString([], { weekday: 'short', hour: '2-digit', minute: '2-digit' });
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/** Stacked bars, oldest on the left. */
export function BarChart({ data, label, bucketSeconds }: { data: Stack[]; label: string; bucketSeconds: number }) {
  const top = Math.max(0, ...data.map((d) => d.parts.reduce((s, p) => s + p.value, 0)));
  const max = Math.max(1, top);
  const bw = W / Math.max(1, data.length);
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} preserveAspectRatio="none" role="img" aria-label={label}>
        <title>{label}</title>
        <line x1={0} y1={H - 0.5} x2={W} y2={H - 0.5} stroke="#d9dee6" />
        {data.map((d, i) => {
          let y = H;
          return (
            <g key={d.t}>
              <title>{`${tick(d.t, bucketSeconds)}: ${d.parts.map((p) => `${p.value} ${p.name}`).join(', ')}`}</title>
              {d.parts.map((p) => {
                if (!p.value) return null;
                const h = Math.max(1, (p.value / max) * (H - 4));
                y -= h;
                return <rect key={p.name} x={i * bw} y={y} width={Math.max(1, bw - 1)} height={h} fill={p.color} />;
              })}
            </g>
          );
        })}
      </svg>
      <Axis data={data} bucketSeconds={bucketSeconds} max={top} />
    </figure>
  );
}

/** A line of one value per bucket (e.g. backlog depth), oldest on the left. */
export function LineChart({ data, label, bucketSeconds, color = '#2f5bd3' }: { data: { t: string; value: number }[]; label: string; bucketSeconds: number; color?: string }) {
  const top = Math.max(0, ...data.map((d) => d.value));
  const max = Math.max(1, top);
  const step = data.length > 1 ? W / (data.length - 1) : W;
  const points = data.map((d, i) => `${(i * step).toFixed(1)},${(H - 2 - (d.value / max) * (H - 6)).toFixed(1)}`).join(' ');
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} preserveAspectRatio="none" role="img" aria-label={label}>
        <title>{label}</title>
        <line x1={0} y1={H - 0.5} x2={W} y2={H - 0.5} stroke="#d9dee6" />
        {data.length ? <polyline points={points} fill="none" stroke={color} stroke-width={2} vector-effect="non-scaling-stroke" /> : null}
      </svg>
      <Axis data={data} bucketSeconds={bucketSeconds} max={top} />
    </figure>
  );
}

function Axis({ data, bucketSeconds, max }: { data: { t: string }[]; bucketSeconds: number; max: number }) {
  if (!data.length) return <figcaption class="muted">No data in this window.</figcaption>;
  return (
    <figcaption class="chart-axis muted">
      <span>{tick(data[0].t, bucketSeconds)}</span>
      <span>max {max}</span>
      <span>{tick(data[data.length - 1].t, bucketSeconds)}</span>
    </figcaption>
  );
}

export function Legend({ items }: { items: [string, string][] }) {
  return (
    <ul class="legend">
      {items.map(([name, color]) => (
        <li key={name}>
          <span class="swatch" style={{ background: color }} aria-hidden="true" /> {name}
        </li>
      ))}
    </ul>
  );
}
