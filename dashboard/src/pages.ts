// Every page of the dashboard: adding one is a file in pages/ and one entry here (docs/dashboard.md).
// `nav` puts it in the side navigation; pages are loaded when first visited (one chunk each).
import type { ComponentType } from 'preact';

export interface PageDef {
  /** wouter pattern under /dashboard, e.g. `/webhooks/:id`. */
  path: string;
  /** Label in the side navigation; left out for detail pages reached by links. */
  nav?: string;
  load: () => Promise<{ default: ComponentType<{ params: Record<string, string | undefined> }> }>;
}

export const PAGES: PageDef[] = [
  { path: '/webhooks', nav: 'Webhooks', load: () => import('./pages/webhooks.tsx') },
  { path: '/webhooks/:id', load: () => import('./pages/webhook.tsx') },
  { path: '/deliveries', nav: 'Deliveries', load: () => import('./pages/deliveries.tsx') },
  { path: '/deliveries/:id', load: () => import('./pages/delivery.tsx') },
  { path: '/metrics', nav: 'Metrics', load: () => import('./pages/metrics.tsx') },
  { path: '/dlq', nav: 'Dead-letter queue', load: () => import('./pages/dlq.tsx') },
  { path: '/schedules', nav: 'Schedules', load: () => import('./pages/schedules.tsx') },
  { path: '/automations', nav: 'Automations', load: () => import('./pages/automations.tsx') },
  { path: '/automations/:id', load: () => import('./pages/automation.tsx') },
  { path: '/alerts', nav: 'Alerts', load: () => import('./pages/alerts.tsx') },
  { path: '/drains', nav: 'Event drains', load: () => import('./pages/drains.tsx') },
  { path: '/providers', nav: 'Provider packs', load: () => import('./pages/providers.tsx') },
  { path: '/conversations/:contactId?', nav: 'Conversations', load: () => import('./pages/conversations.tsx') },
  { path: '/usage', nav: 'Usage & quotas', load: () => import('./pages/usage.tsx') },
  { path: '/api-keys', nav: 'API keys', load: () => import('./pages/api-keys.tsx') },
  { path: '/audit-log', nav: 'Audit log', load: () => import('./pages/audit-log.tsx') },
];

/** Where a nav entry links to: its path without parameters. */
export function navHref(p: PageDef): string {
  return p.path.replace(/\/:[^/]+\?$/, '');
}
