// The layering of src/ (docs/architecture.md), checked by test/structure.layering.test.ts and by
// `npx depcruise src jobs --config .dependency-cruiser.cjs` (dependency-cruiser).
// The layers, bottom up: base ← domains ← edge ← entry points (docs/architecture.md).

// Base: files and folders below every domain; they import no domain and nothing of the edge.
const BASE_FILES = 'errors|config|ids|log|validation|encryption|auth|runtime|version|prom|tracing|process-identity|stop-signal';
const BASE_FOLDERS = 'db|pagination|graphql|wire|outbound';
const BASE = `^src/((${BASE_FILES})\\.ts$|(${BASE_FOLDERS})/)`;

// Domains, bottom up: a domain imports only domains listed before it, so the folders point one
// way. A new domain goes after everything it imports.
const DOMAIN_ORDER = [
  'projects', 'webhook-config', 'users', 'files', 'retention', 'conversations', 'providers', 'routing', 'metrics',
  'destinations', 'automations', 'drains', 'alerts', 'deliveries', 'ingest', 'schedules', 'webhooks',
];
const DOMAINS = DOMAIN_ORDER.join('|');

// The edge: the HTTP server, the GraphQL schema's assembly and the graphile-worker tasks.
const EDGE = '^src/(http|schema)/|^jobs/';
const ENTRY_POINTS = '^src/(main|api|worker|cli|bootstrap|app)\\.ts$';

// A domain's public modules: the only files of it that a sibling domain or the edge imports
// (service functions, pure rules and types, its GraphQL types, its job's handler). Everything
// else in a domain is its own.
const PUBLIC = [
  '^src/projects/(service|gates|tiers|audit|graphql)\\.ts$',
  '^src/projects/quotas/(limits|ingest-check|ingest-hint|replay|file-storage)\\.ts$',
  '^src/webhook-config/',
  '^src/webhooks/graphql\\.ts$',
  '^src/routing/(rules|service|graphql)\\.ts$',
  '^src/destinations/(service|config|graphql)\\.ts$',
  '^src/destinations/senders/index\\.ts$',
  '^src/destinations/listen/graphql\\.ts$',
  '^src/deliveries/(job|enqueue|replay|notify|delivery-reads|graphql|engine|batch-run|listeners)\\.ts$',
  '^src/providers/(index|service|graphql)\\.ts$',
  '^src/ingest/(cron-ingest|channels)\\.ts$',
  '^src/schedules/(service|tick|graphql)\\.ts$',
  '^src/retention/run\\.ts$',
  '^src/conversations/graphql\\.ts$',
  '^src/files/(service|store|graphql|orphans)\\.ts$',
  '^src/automations/(service|run|graphql|limits)\\.ts$',
  '^src/metrics/(service|sketch|backlog|graphql|rollup|ingest-counts)\\.ts$',
  '^src/drains/(service|send|graphql)\\.ts$',
  '^src/alerts/(rules|evaluate|graphql)\\.ts$',
  '^src/users/service\\.ts$',
];

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
      comment: 'The base (BASE_FILES, BASE_FOLDERS: config, db, errors, ids, log, tracing, wire/, outbound/, …) imports no domain, nothing of the edge and no entry point.',
      severity: 'error',
      from: { path: BASE },
      to: { path: `^src/(${DOMAINS})/|${EDGE}|${ENTRY_POINTS}` },
    },
    {
      name: 'domain-to-sibling-internals',
      comment: "A domain reaches a sibling only through the sibling's public modules (service functions, pure rules, GraphQL types).",
      severity: 'error',
      from: { path: `^src/(${DOMAINS})/` },
      to: { path: `^src/(${DOMAINS})/`, pathNot: ['^src/$1/', ...PUBLIC] },
    },
    // One rule per domain (all named domain-order): the folder graph of the domains has no cycle.
    ...DOMAIN_ORDER.slice(0, -1).map((domain, i) => ({
      name: 'domain-order',
      comment: `Domains import one way (DOMAIN_ORDER, bottom up): ${domain} imports no domain listed after it.`,
      severity: 'error',
      from: { path: `^src/${domain}/` },
      to: { path: `^src/(${DOMAIN_ORDER.slice(i + 1).join('|')})/` },
    })),
    {
      name: 'edge-imports-only-public',
      comment: "The edge (http/, schema/, jobs/) reaches a domain only through the domain's public modules, as siblings do.",
      severity: 'error',
      from: { path: EDGE },
      to: { path: `^src/(${DOMAINS})/`, pathNot: PUBLIC },
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
      to: { path: `${EDGE}|${ENTRY_POINTS}` },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
