// One delivery: its request (the destination snapshot), attempts with response snippets, replays.
import { useEffect, useState } from 'preact/hooks';
import { Link } from 'wouter-preact';
import { gql, subscribe } from '../api.ts';
import { graphql, type ResultOf } from '../graphql.ts';
import { Badge, ConfirmButton, ErrorBanner, Json, Loading, Page, Section, Time, useAction, useQuery } from '../ui.tsx';
import { DELIVERY_FIELDS, type Delivery } from '../parts/deliveries.tsx';
import { EventFiles } from '../parts/event-files.tsx';

const REPLAY = graphql(`mutation($id: ID!) { replayDelivery(id: $id) { id status created total } }`);

export default function DeliveryPage({ params }: { params: Record<string, string | undefined> }) {
  const id = params.id!;
  const q = useQuery(
    () =>
      gql(
        graphql(`query($id: ID!) {
          delivery(id: $id) { ...DeliveryFields }
          deliveryAttempts(id: $id, limit: 100) { items { id number outcome statusCode durationMs error responseSnippet startedAt } }
          deliveryReplayJobs(id: $id, limit: 20) { items { id kind status created total createdAt completedAt } }
        }`, [DELIVERY_FIELDS]),
        { id },
      ),
    [id],
  );
  const [replayed, setReplayed] = useState<ResultOf<typeof REPLAY>['replayDelivery']>();
  const replay = useAction(async () => {
    const d = await gql(REPLAY, { id });
    setReplayed(d.replayDelivery);
    q.reload();
  });
  const webhookId: string | undefined = q.data?.delivery.webhookId;
  useEffect(() => {
    if (!webhookId) return;
    // This delivery's new attempts and states, as they happen.
    return subscribe(graphql(`subscription($w: ID) { deliveryUpdated(webhookId: $w) { id status } }`), { w: webhookId }, ({ deliveryUpdated }) => {
      if (deliveryUpdated.id === id) q.reload();
    });
  }, [webhookId, id]);
  if (q.error) return <Page title="Delivery"><ErrorBanner error={q.error} /><Link href="/deliveries">Back to deliveries</Link></Page>;
  if (!q.data) return <Loading />;
  const d: Delivery = q.data.delivery;
  const attempts = q.data.deliveryAttempts.items;
  return (
    <Page
      title={`Delivery ${d.id}`}
      actions={
        <>
          <Badge value={d.status} />
          <ConfirmButton label="Replay" title="Replay this delivery?" body="The same request (byte for byte, same webhook-id) is sent again as a new delivery." onConfirm={() => replay.call()} />
        </>
      }
    >
      <ErrorBanner error={replay.error} />
      {replayed ? (
        <p class="success-banner" role="status">
          Replay queued (job <code>{replayed.id}</code>, {replayed.status}). The new delivery appears in <Link href={`/deliveries?webhookId=${d.webhookId}`}>the webhook's deliveries</Link>.
        </p>
      ) : null}
      <Section title="Summary">
        <dl class="facts">
          <dt>Webhook</dt>
          <dd>
            <Link href={`/webhooks/${d.webhookId}`}>{d.webhookId}</Link>
          </dd>
          <dt>Event</dt>
          <dd>
            <Link href={`/deliveries?eventId=${d.eventId}`}>{d.eventId}</Link>
          </dd>
          {d.idempotencyKey !== null ? (
            <>
              <dt>Idempotency key</dt>
              <dd>
                <Link href={`/deliveries?webhookId=${d.webhookId}&idempotencyKey=${encodeURIComponent(d.idempotencyKey)}`}>
                  <code>{d.idempotencyKey}</code>
                </Link>
              </dd>
            </>
          ) : null}
          <dt>Attempts</dt>
          <dd>{d.attempts}</dd>
          <dt>Created</dt>
          <dd>
            <Time value={d.createdAt} />
          </dd>
          <dt>Completed</dt>
          <dd>
            <Time value={d.completedAt} />
          </dd>
          <dt>Next attempt</dt>
          <dd>
            <Time value={d.nextAttemptAt} />
          </dd>
          {d.replayOf ? (
            <>
              <dt>Replay of</dt>
              <dd>
                <Link href={`/deliveries/${d.replayOf}`}>{d.replayOf}</Link>
              </dd>
            </>
          ) : null}
        </dl>
      </Section>
      <Section title="Request">
        <p class="muted">Where and how it is sent (the destination as it was when the event arrived):</p>
        <Json value={d.destination} />
      </Section>
      <EventFiles eventId={d.eventId} />
      <Section title="Attempts">
        {attempts.length === 0 ? <p>No attempt yet{d.nextAttemptAt ? '; the first is planned for the time above' : ''}.</p> : null}
        <ol class="list stack" aria-label="Attempts">
          {attempts.map((a) => (
            <li key={a.id} class="card" data-testid="attempt">
              <div class="card-header">
                <h3>Attempt {a.number}</h3>
                <Badge value={a.outcome} />
                <span>{a.statusCode ? `HTTP ${a.statusCode}` : 'no HTTP answer'}</span>
                <span class="muted">{a.durationMs !== null ? `${a.durationMs} ms` : ''}</span>
                <Time value={a.startedAt} />
              </div>
              {a.error ? <div class="error-banner">{a.error}</div> : null}
              <h4>Response</h4>
              {a.responseSnippet ? <pre class="code">{a.responseSnippet}</pre> : <p class="muted">No response body.</p>}
            </li>
          ))}
        </ol>
      </Section>
      <Section title="Replays">
        {q.data.deliveryReplayJobs.items.length === 0 ? <p class="muted">Not replayed.</p> : null}
        <ul>
          {q.data.deliveryReplayJobs.items.map((j) => (
            <li key={j.id}>
              <code>{j.id}</code> <Badge value={j.status} /> {j.created}/{j.total} created, <Time value={j.createdAt} />
            </li>
          ))}
        </ul>
      </Section>
    </Page>
  );
}
