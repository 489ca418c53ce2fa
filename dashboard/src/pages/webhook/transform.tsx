// Transform: none, a JSONata expression, or a pinned automation version.
import { useState } from 'preact/hooks';
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ActionForm, Field, formText, Section, Select, TextArea, useAction, useQuery } from '../../ui.tsx';

export function Transform({ webhookId, transform }: { webhookId: string; transform: { kind: string | null; expression: string | null; automationId: string | null; version: number | null } }) {
  const [kind, setKind] = useState(transform.kind ?? '');
  // The project's automations, for kind "automation" (Starter and above; an error here only hides the list).
  const automations = useQuery(() => gql(graphql(`{ automations(limit: 100) { items { id name currentVersion status } } }`)).then((d) => d.automations.items), []);
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const version = String(f.get('version') ?? '').trim();
    await gql(graphql(`mutation($id: ID!, $kind: String, $expression: String, $automationId: String, $version: Int) { setWebhookTransform(id: $id, kind: $kind, expression: $expression, automationId: $automationId, version: $version) { kind } }`), {
      id: webhookId,
      kind: kind || null,
      expression: kind === 'jsonata' ? formText(f, 'expression') : undefined,
      automationId: kind === 'automation' ? formText(f, 'automationId') : undefined,
      version: kind === 'automation' && version ? Number(version) : undefined,
    });
  });
  return (
    <Section title="Transform">
      <ActionForm action={save} submit="Save transform" done="Transform saved.">
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
      </ActionForm>
    </Section>
  );
}
