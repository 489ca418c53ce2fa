import type { Automation, AutomationRun, AutomationVersion } from '../generated/prisma/client.ts';
import { builder } from '../graphql/builder.ts';
import { connectionOf, pageArgs, pageOf, pageRequestOf } from '../pagination/graphql.ts';
import { FEATURE_TIERS } from '../projects/tiers.ts';
import {
  createAutomation,
  createVersion,
  deleteAutomation,
  getAutomation,
  getEgressPolicy,
  listAutomations,
  listRuns,
  listVersions,
  setEgressPolicy,
  updateAutomation,
} from './service.ts';

export const AutomationRef = builder.prismaObject('Automation', {
  description: 'User code in the event path: an ES module whose default export is (event, ctx) => result, run in a sandbox.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    status: t.exposeString('status', { description: 'active or disabled' }),
    currentVersion: t.exposeInt('currentVersion', { description: 'The latest version (what a transform pins when it names none).' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const AutomationVersionRef = builder.prismaObject('AutomationVersion', {
  description: 'An immutable version of an automation’s code.',
  fields: (t) => ({
    automationId: t.exposeID('automationId'),
    version: t.exposeInt('version'),
    codeSha256: t.exposeString('codeSha256', { description: 'sha256 of the code, hex.' }),
    code: t.exposeString('code'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const AutomationRunRef = builder.prismaObject('AutomationRun', {
  description: 'One run of an automation version: a delivery attempt’s, or test-delivery’s (deliveryId null).',
  fields: (t) => ({
    id: t.exposeID('id'),
    version: t.exposeInt('version'),
    deliveryId: t.exposeString('deliveryId', { nullable: true }),
    status: t.exposeString('status', { description: 'ok, error, cpu_limit, memory_limit, subrequest_limit or egress_blocked' }),
    cpuMs: t.exposeFloat('cpuMs', { description: 'Time the code ran in the engine, ms.' }),
    subrequests: t.exposeInt('subrequests'),
    logs: t.exposeString('logs', { description: 'console output, one line per call, up to the tier’s log limit per run.' }),
    logsTruncated: t.exposeBoolean('logsTruncated', { description: 'The output reached the per-run log limit and was cut there (the run went on).' }),
    error: t.exposeString('error', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const AutomationPageRef = pageOf<Automation>('AutomationPage', AutomationRef);
const AutomationVersionPageRef = pageOf<AutomationVersion>('AutomationVersionPage', AutomationVersionRef);
const AutomationRunPageRef = pageOf<AutomationRun>('AutomationRunPage', AutomationRunRef);

const AutomationDeletedRef = builder.objectRef<{ id: string; deleted: boolean }>('AutomationDeleted').implement({
  fields: (t) => ({ id: t.exposeID('id'), deleted: t.exposeBoolean('deleted') }),
});

const EgressPolicyRef = builder.objectRef<{ allowedHosts: string[] }>('EgressPolicy').implement({
  description: 'The exact hosts Automations’ ctx.fetch may reach; empty: egress blocked.',
  fields: (t) => ({ allowedHosts: t.exposeStringList('allowedHosts') }),
});

const tiers = `${FEATURE_TIERS.automations} tier and above`;

builder.queryFields((t) => ({
  automations: t.field({
    type: AutomationPageRef,
    description: `The project's automations, newest first (cursor-paginated). ${tiers}.`,
    args: { ...pageArgs },
    resolve: (_r, a, ctx) => listAutomations(ctx.rt, ctx.auth.projectId, a),
  }),
  automationsConnection: t.connection({
    type: AutomationRef,
    description: `The project's automations, newest first, as a Relay connection. ${tiers}.`,
    resolve: async (_r, a, ctx) => connectionOf(await listAutomations(ctx.rt, ctx.auth.projectId, pageRequestOf(a))),
  }),
  automation: t.prismaField({
    type: 'Automation',
    description: 'One automation.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_q, _r, a, ctx) => getAutomation(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  automationVersions: t.field({
    type: AutomationVersionPageRef,
    description: "An automation's versions, newest first (cursor-paginated).",
    args: { id: t.arg.id({ required: true }), ...pageArgs },
    resolve: (_r, a, ctx) => listVersions(ctx.rt, ctx.auth.projectId, String(a.id), a),
  }),
  automationVersionsConnection: t.connection({
    type: AutomationVersionRef,
    description: "An automation's versions, newest first, as a Relay connection.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, a, ctx) => connectionOf(await listVersions(ctx.rt, ctx.auth.projectId, String(a.id), pageRequestOf(a))),
  }),
  automationRuns: t.field({
    type: AutomationRunPageRef,
    description: "An automation's runs, newest first (cursor-paginated).",
    args: { id: t.arg.id({ required: true }), ...pageArgs },
    resolve: (_r, a, ctx) => listRuns(ctx.rt, ctx.auth.projectId, String(a.id), a),
  }),
  automationRunsConnection: t.connection({
    type: AutomationRunRef,
    description: "An automation's runs, newest first, as a Relay connection.",
    args: { id: t.arg.id({ required: true }) },
    resolve: async (_r, a, ctx) => connectionOf(await listRuns(ctx.rt, ctx.auth.projectId, String(a.id), pageRequestOf(a))),
  }),
  egressPolicy: t.field({
    type: EgressPolicyRef,
    description: "The project's Automation egress policy.",
    resolve: (_r, _a, ctx) => getEgressPolicy(ctx.rt, ctx.auth.projectId),
  }),
}));

builder.mutationFields((t) => ({
  createAutomation: t.prismaField({
    type: 'Automation',
    description: `Creates an automation (active) with its version 1. ${tiers}; counts against the automations, active and daily version quotas.`,
    args: { name: t.arg.string({ required: false, description: 'Required.' }), code: t.arg.string({ required: false, description: 'Required: an ES module whose default export is (event, ctx) => result.' }) },
    resolve: (_q, _r, a, ctx) => createAutomation(ctx.rt, ctx.auth.projectId, a),
  }),
  updateAutomation: t.prismaField({
    type: 'Automation',
    description: 'Renames an automation or changes its status (active or disabled; a disabled one fails the deliveries that pin it).',
    args: { id: t.arg.id({ required: true }), name: t.arg.string({ required: false }), status: t.arg.string({ required: false, description: 'active or disabled' }) },
    resolve: (_q, _r, { id, ...a }, ctx) => updateAutomation(ctx.rt, ctx.auth.projectId, String(id), a),
  }),
  deleteAutomation: t.field({
    type: AutomationDeletedRef,
    description: 'Deletes an automation with its versions and runs (409 invalid_state while a webhook transform pins it).',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_r, a, ctx) => deleteAutomation(ctx.rt, ctx.auth.projectId, String(a.id)),
  }),
  createAutomationVersion: t.prismaField({
    type: 'AutomationVersion',
    description: "Adds a version (the automation's new currentVersion); versions are immutable.",
    args: { id: t.arg.id({ required: true }), code: t.arg.string({ required: false, description: 'Required.' }) },
    resolve: (_q, _r, { id, ...a }, ctx) => createVersion(ctx.rt, ctx.auth.projectId, String(id), a),
  }),
  setEgressPolicy: t.field({
    type: EgressPolicyRef,
    description: `Sets the exact hosts Automations may fetch (${FEATURE_TIERS.automation_egress_policies} only); an empty list blocks egress.`,
    args: { allowedHosts: t.arg.stringList({ required: false }) },
    resolve: (_r, a, ctx) => setEgressPolicy(ctx.rt, ctx.auth.projectId, a),
  }),
}));
