import { InvalidRequest, NotFound } from '../../errors.ts';
import type { Destination } from '../../generated/prisma/client.ts';
import type { Runtime } from '../../runtime.ts';
import { listDestinations } from '../service.ts';

type Rt = Pick<Runtime, 'db'>;

const named = (d: Destination) => `${d.name} (${d.id})`;

/**
 * The cli destination a `relay listen` session takes deliveries of (CONTRACT §13): the one named,
 * else the webhook's default destination when it is a cli one. Otherwise a 400 that names the
 * webhook's cli destinations, or says how to add one.
 */
export async function listenDestination(rt: Rt, projectId: string, webhookId: string, destinationId?: string | null): Promise<Destination> {
  const all = await listDestinations(rt, projectId, webhookId);
  const cli = all.filter((d) => d.type === 'cli');
  if (destinationId) {
    const d = all.find((x) => x.id === destinationId);
    if (!d) throw new NotFound('destination', destinationId);
    if (d.type !== 'cli') {
      const others = cli.length ? ` Its cli destinations: ${cli.map(named).join(', ')}.` : '';
      throw new InvalidRequest(`Destination ${named(d)} is a ${d.type} destination, not a cli one: only cli destinations deliver through relay listen.${others}`, 'destinationId');
    }
    return d;
  }
  const byDefault = all.find((d) => d.isDefault);
  if (byDefault?.type === 'cli') return byDefault;
  if (cli.length) {
    throw new InvalidRequest(
      `The default destination of webhook ${webhookId} is not a cli one; name one of its cli destinations (relay listen --destination): ${cli.map(named).join(', ')}.`,
      'destinationId',
    );
  }
  throw new InvalidRequest(
    `Webhook ${webhookId} has no cli destination. Add one with POST /v1/webhooks/${webhookId}/destinations {"name": "local", "type": "cli", "config": {}} ` +
      `(then route events to it, or pass its id to relay listen --destination), or make the default one cli: PATCH /v1/webhooks/${webhookId} {"destination": {"type": "cli", "config": {}}}.`,
    'destinationId',
  );
}
