// `relay`: the service's command for developers (CONTRACT §13). In a checkout: `npm run -s relay -- …`;
// installed: the package's `relay` bin. Every command talks to a running service with an API key.
import { Command, Option } from 'commander';
import { listDeliveries, replayDelivery, type ListOptions } from './deliveries.ts';
import { ingestSend, type IngestSendOptions } from './ingest.ts';
import { listen } from './listen.ts';
import { asRelayError, createOutput } from './output.ts';
import { createRestClient } from './rest.ts';
import { DEFAULT_BASE_URL, resolveConnection, type ConnectionOptions } from './settings.ts';

const CONNECTION_HELP = `
The service and the key: --base-url (else RELAY_BASE_URL, else ${DEFAULT_BASE_URL}) and
--api-key (else RELAY_API_KEY), a project API key as \`npm start\` prints it on its first run.
Errors are one line on stderr (with --json, a {"type": "error", "code", "message"} object), exit code 1.`;

/** The options every command takes: where the service is, the key, and --json. */
function withConnection(cmd: Command): Command {
  return cmd
    .addOption(new Option('--base-url <url>', `the service's address (default: RELAY_BASE_URL, else ${DEFAULT_BASE_URL})`))
    .addOption(new Option('--api-key <key>', 'a project API key (default: RELAY_API_KEY)'))
    .option('--json', 'one JSON object a line, for programs')
    .addHelpText('after', CONNECTION_HELP);
}

/** Runs one command with its options and positional arguments: a failure is one line and exit code 1. */
function run<O extends ConnectionOptions>(fn: (opts: O, args: string[]) => Promise<number | void>) {
  return async (...args: unknown[]) => {
    const cmd = args[args.length - 1] as Command;
    const opts = cmd.opts<O>();
    try {
      process.exitCode = (await fn(opts, args.slice(0, -2) as string[])) ?? 0;
    } catch (err) {
      createOutput(!!opts.json).error(asRelayError(err));
      process.exitCode = 1;
    }
  };
}

/**
 * Runs the command line `argv` (as process.argv) with the environment `env` (RELAY_BASE_URL,
 * RELAY_API_KEY, RELAY_INGEST_SECRET): its entry point, bin/relay.mjs, passes them in, so this
 * code reads no environment of its own.
 */
export async function runRelay(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const program = new Command('relay')
    .description('Develop against the webhook service: forward deliveries to localhost, send events, look at and replay deliveries.')
    .showHelpAfterError('(relay --help lists the commands; relay COMMAND --help explains one)')
    .addHelpText(
      'after',
      `
  Develop locally, in three lines:
    curl -s -X POST $RELAY_BASE_URL/v1/webhooks/WEBHOOK_ID/destinations -H "authorization: Bearer $RELAY_API_KEY" \\
         -H 'content-type: application/json' -d '{"name": "local", "type": "cli", "config": {}}'
    relay listen WEBHOOK_ID --destination DESTINATION_ID --forward-to http://localhost:4000/webhooks
    relay ingest send WEBHOOK_ID --data @event.json --ingest-secret whsec_…
  docs/listen.md has the rest.`,
    );

  withConnection(
    program
      .command('listen')
      .summary("forward a webhook's deliveries to a local URL")
      .description(
        `Takes the deliveries of the webhook's cli destination and sends each to --forward-to from this machine:
  the exact request the server would have sent (method, body, content type, the Standard Webhooks
  webhook-id / webhook-timestamp / webhook-signature headers, verifiable with the webhook's signing
  secret, and the webhook's custom headers). The local server's answer (status, duration, error) is
  reported back and recorded as the delivery's attempt, like any other: the deliveries page, retries,
  the DLQ, replay, metrics and alerts see it. A refused connection or a timeout is the attempt's
  network error or timeout, retried by the webhook's retry policy.

  The cli destination: --destination, else the webhook's default destination when it is a cli one.
  Add one with POST /v1/webhooks/WEBHOOK_ID/destinations {"name": "local", "type": "cli", "config": {}}
  (and a routing rule, or pass its id here), or make the default destination a cli one.

  While no listen session is connected, attempts to a cli destination fail with "no listener
  connected" and are retried by the policy. Several sessions on one destination share its
  deliveries: each goes to one of them. The server never connects to your machine: this command
  holds one WebSocket to the service (GraphQL over graphql-ws on /graphql) and reconnects by itself,
  with backoff, when it drops.

  Output: a line when connected, then one line per delivery: time, delivery id, method and local
  path, status code (or the error), duration. --json: {"type": "ready", …}, then
  {"type": "delivery", …} objects, one a line. Ctrl-C prints a summary and exits 0.`,
      )
      .argument('<webhookId>', 'the webhook (wh_…)')
      .requiredOption('--forward-to <url>', 'where to send each delivery, e.g. http://localhost:4000/webhooks')
      .option('--destination <destinationId>', "the webhook's cli destination (default: its default destination, if it is a cli one)")
      .action(
        run<ConnectionOptions & { forwardTo: string; destination?: string }>(async (opts, [webhookId]) =>
          listen(resolveConnection(opts, env), { webhookId, forwardTo: opts.forwardTo, destinationId: opts.destination }, createOutput(!!opts.json)),
        ),
      ),
  );

  const ingest = program.command('ingest').description("Send events into a webhook's ingest.");
  withConnection(
    ingest
      .command('send')
      .description(
        `Sends one event to the webhook's HTTP ingest (POST /i/{publicId}), as a producer would. The API key
  finds the webhook; ingest itself takes the webhook's ingest secret (--ingest-secret, else
  RELAY_INGEST_SECRET). Prints the ingest answer: status (queued, scheduled or duplicate), eventId, deliveryId.`,
      )
      .argument('<webhookId>', 'the webhook (wh_…)')
      .requiredOption('--data <data>', 'the body: @file.json reads a file, @- standard input, anything else is sent as is')
      .option('--content-type <type>', 'the content type of the body', 'application/json')
      .option('--idempotency-key <key>', 'sent as the Idempotency-Key header: a retry with the same key and body is answered as a duplicate')
      .option('--ingest-secret <secret>', "the webhook's ingest secret (default: RELAY_INGEST_SECRET)")
      .option('--header <header...>', 'more headers, "Name: value"')
      .action(
        run<ConnectionOptions & IngestSendOptions>(async (opts, [webhookId]) => {
          await ingestSend(createRestClient(resolveConnection(opts, env)), webhookId, opts, env, createOutput(!!opts.json));
        }),
      ),
  );

  const deliveriesCmd = program.command('deliveries').description('Look at and replay deliveries.');
  withConnection(
    deliveriesCmd
      .command('list')
      .description("Lists the project's deliveries, newest first: time, id, webhook, status, attempts, last answer, destination. --json prints the API's page.")
      .option('--webhook <webhookId>', "only this webhook's deliveries")
      .option('--status <status>', 'only deliveries in this status: queued, scheduled, delivering, retrying, succeeded, failed or cancelled')
      .option('--limit <n>', 'page size, 1..100', '20')
      .option('--cursor <cursor>', 'the next page, as the previous one printed it')
      .action(
        run<ConnectionOptions & ListOptions>(async (opts) => {
          await listDeliveries(createRestClient(resolveConnection(opts, env)), opts, createOutput(!!opts.json));
        }),
      ),
  );
  withConnection(
    deliveriesCmd
      .command('replay')
      .description(
        'Replays a delivery: a new delivery re-sends its retained bytes, with the same webhook-id, to the same destination (a cli destination: through relay listen). Prints the replay job.',
      )
      .argument('<deliveryId>', 'the delivery (del_…)')
      .action(
        run(async (opts, [deliveryId]) => {
          await replayDelivery(createRestClient(resolveConnection(opts, env)), deliveryId, createOutput(!!opts.json));
        }),
      ),
  );

  await program.parseAsync(argv);
}
