// Routing rules: the ordered rules that pick a destination, edited as a draft and saved together.
import { useState } from 'preact/hooks';
import { gql } from '../../api.ts';
import { graphql, toJson } from '../../graphql.ts';
import { ErrorBanner, Field, Section, Select, TextArea, parseJsonField, useAction } from '../../ui.tsx';
import type { Destination } from './webhook.ts';

export interface Rule {
  name: string;
  priority: number;
  destinationId: string;
  match: unknown;
}

export function Routing({ webhookId, rules, destinations }: { webhookId: string; rules: Rule[]; destinations: Destination[] }) {
  const [draft, setDraft] = useState(() => rules.map((r) => ({ ...r, matchText: JSON.stringify(r.match, null, 2) })));
  const [saved, setSaved] = useState(false);
  const save = useAction(async () => {
    const input = draft.map((r, i) => ({ name: r.name, priority: Number(r.priority), destinationId: r.destinationId, match: parseJsonField(r.matchText, `Rule ${i + 1} match`) ?? toJson({}) }));
    await gql(graphql(`mutation($id: ID!, $rules: [RoutingRuleInput!]!) { setWebhookRouting(id: $id, rules: $rules) { rules { name } } }`), { id: webhookId, rules: input });
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
            setDraft([...draft, { name: `rule-${draft.length + 1}`, priority: (draft.at(-1)?.priority ?? 0) + 10, destinationId: destinations[0]?.id ?? '', match: toJson({}), matchText: '{"body.type": "order.created"}' }])
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
