// The layering of src/ (docs/architecture.md), checked by test/structure.layering.test.ts and by
// `npx depcruise src` (dependency-cruiser).
const DOMAINS = 'projects|webhook-config|webhooks|routing|destinations|deliveries|ingest|schedules|retention|conversations|providers|files|automations|metrics|drains|alerts|users';

// What a domain offers its siblings: service functions, pure rules and types, and the GraphQL
// types other domains' fields are built from. Everything else in a domain is its own.
const PUBLIC = [
  '^src/projects/(service|gates|tiers|audit)\\.ts$',
  '^src/projects/quotas/(limits|ingest-check|ingest-hint|replay|file-storage)\\.ts$',
  '^src/webhook-config/',
  '^src/routing/(rules|service|graphql)\\.ts$',
  '^src/destinations/(service|config|graphql)\\.ts$',
  '^src/destinations/senders/index\\.ts$',
  '^src/deliveries/(job|replay|notify|delivery-reads)\\.ts$',
  '^src/providers/(index|service|graphql)\\.ts$',
  '^src/ingest/cron-ingest\\.ts$',
  '^src/schedules/(service|tick|graphql)\\.ts$',
  '^src/retention/run\\.ts$',
  '^src/files/(service|store|graphql|orphans)\\.ts$',
  '^src/automations/(service|run|graphql|limits)\\.ts$',
  '^src/metrics/(service|sketch|backlog|graphql|rollup)\\.ts$',
  '^src/drains/(service|send|graphql)\\.ts$',
  '^src/alerts/(rules|evaluate|graphql)\\.ts$',
  '^src/users/service\\.ts$',
];

// Below every domain: they import no domain and nothing of the edge.
const BASE = '^src/((errors|config|ids|log|validation|encryption|auth|runtime|version|prom|tracing)\\.ts$|db/|pagination/|graphql/|wire/|outbound/)';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No file cycles: a cycle means two modules are one, or one holds what belongs below both.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'base-imports-no-domain',
      comment: 'db/, errors, config, ids and the other base modules import no domain and nothing of the edge (http/, graphql schema, app).',
      severity: 'error',
      from: { path: BASE },
      to: { path: `^src/(${DOMAINS}|http)/|^src/schema/|^src/(app|main|api|worker|cli|bootstrap)\\.ts$|^jobs/` },
    },
    {
      name: 'domain-to-sibling-internals',
      comment: "A domain reaches a sibling only through the sibling's public modules (service functions, pure rules, GraphQL types).",
      severity: 'error',
      from: { path: `^src/(${DOMAINS})/` },
      to: { path: `^src/(${DOMAINS})/`, pathNot: ['^src/$1/', ...PUBLIC] },
    },
    {
      name: 'relay-command-is-a-client',
      comment: 'The relay command (src/relay/) talks to the service over HTTP and WebSocket only: it imports nothing else of src/, so it runs (and could ship) without the server.',
      severity: 'error',
      from: { path: '^src/relay/' },
      to: { path: '^src/', pathNot: '^src/relay/' },
    },
    {
      name: 'nothing-imports-the-relay-command',
      comment: 'The service does not import its own client.',
      severity: 'error',
      from: { path: '^(src|jobs)/', pathNot: '^src/relay/' },
      to: { path: '^src/relay/' },
    },
    {
      name: 'domain-to-edge',
      comment: 'Domains do not import the edge (HTTP server, GraphQL schema assembly, jobs, entry points); request bodies and answers are read and written with the base wire/ helpers.',
      severity: 'error',
      from: { path: `^src/(${DOMAINS})/` },
      to: { path: '^src/http/|^src/schema/|^src/(app|main|api|worker|cli|bootstrap)\\.ts$|^jobs/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
