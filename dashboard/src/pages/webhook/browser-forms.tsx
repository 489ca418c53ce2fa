// Browser forms (CONTRACT §12): form access and the allowed origins.
import { gql } from '../../api.ts';
import { graphql } from '../../graphql.ts';
import { ActionForm, formText, Section, Select, TextArea, useAction } from '../../ui.tsx';
import { WEBHOOK, type Webhook } from './webhook.ts';

export function BrowserForms({ webhook, onSaved }: { webhook: Webhook; onSaved: (w: Webhook) => void }) {
  const save = useAction(async (form: HTMLFormElement) => {
    const f = new FormData(form);
    const origins = String(f.get('formAllowedOrigins') ?? '')
      .split(/[\s,]+/)
      .filter(Boolean);
    const data = await gql(
      graphql(`mutation($id: ID!, $formAccess: String, $formAllowedOrigins: [String!]) { updateWebhook(id: $id, formAccess: $formAccess, formAllowedOrigins: $formAllowedOrigins) { ...WebhookFields } }`, [WEBHOOK]),
      { id: webhook.id, formAccess: formText(f, 'formAccess'), formAllowedOrigins: origins.length ? origins : ['*'] },
    );
    onSaved(data.updateWebhook);
  });
  return (
    <Section title="Browser forms">
      <ActionForm action={save} submit="Save form settings" done="Form settings saved." formKey={webhook.updatedAt}>
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
      </ActionForm>
    </Section>
  );
}
