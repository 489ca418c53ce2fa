// The audit log (Business tier and above): who changed what, filtered by action or target.
import { useLocation, useSearch } from 'wouter-preact';
import { gql } from '../api.ts';
import { graphql } from '../graphql.ts';
import { Empty, Field, Page, PagedTable, Time, usePaged } from '../ui.tsx';

export default function AuditLogPage() {
  const [, navigate] = useLocation();
  const search = new URLSearchParams(useSearch());
  const filters = { action: search.get('action') ?? '', targetType: search.get('targetType') ?? '', targetId: search.get('targetId') ?? '' };
  const setFilter = (k: keyof typeof filters, v: string) => {
    const next = new URLSearchParams(search);
    if (v) next.set(k, v);
    else next.delete(k);
    navigate(`/audit-log${next.size ? `?${next}` : ''}`, { replace: true });
  };
  const list = usePaged(
    (cursor) =>
      gql(graphql(`query($cursor: String, $action: String, $targetType: String, $targetId: String) { auditLogs(limit: 50, cursor: $cursor, action: $action, targetType: $targetType, targetId: $targetId) { items { id action actor targetType targetId data createdAt } nextCursor } }`), {
        cursor,
        action: filters.action || undefined,
        targetType: filters.targetType || undefined,
        targetId: filters.targetId || undefined,
      }).then((d) => d.auditLogs),
    [JSON.stringify(filters)],
  );
  return (
    <Page title="Audit log">
      <form class="filters" role="search" aria-label="Filter the audit log" onSubmit={(e) => e.preventDefault()}>
        <Field label="Action" name="action" value={filters.action} placeholder="webhook.update" onChange={(e) => setFilter('action', e.currentTarget.value.trim())} />
        <Field label="Target type" name="targetType" value={filters.targetType} placeholder="webhook" onChange={(e) => setFilter('targetType', e.currentTarget.value.trim())} />
        <Field label="Target id" name="targetId" value={filters.targetId} onChange={(e) => setFilter('targetId', e.currentTarget.value.trim())} />
      </form>
      <PagedTable
        list={list}
        label="Audit log"
        columns={['When', 'Action', 'Actor', 'Target', 'Details']}
        empty={<Empty title="No audit entries">Changes made with an API key or in this dashboard are recorded here.</Empty>}
        row={(a) => (
          <tr key={a.id}>
            <td>
              <Time value={a.createdAt} />
            </td>
            <td>
              <code>{a.action}</code>
            </td>
            <td>
              <code>{a.actor}</code>
            </td>
            <td>
              {a.targetType} {a.targetId ? <code>{a.targetId}</code> : null}
            </td>
            <td>
              <details>
                <summary>Data</summary>
                <pre class="code">{JSON.stringify(a.data, null, 2)}</pre>
              </details>
            </td>
          </tr>
        )}
      />
    </Page>
  );
}
