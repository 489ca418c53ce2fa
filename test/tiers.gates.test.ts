import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIERS } from '../src/config.ts';
import { DomainError } from '../src/errors.ts';
import { hasFeature, requireFeature } from '../src/projects/gates.ts';
import { setProjectQuota, setProjectTier } from '../src/projects/service.ts';
import { FEATURE_TIERS, TIER_ORDER, TIER_QUOTAS, type Feature } from '../src/projects/tiers.ts';
import { rejection } from './support/quota-fixtures.ts';
import { startTestApp, type TestApp } from './support/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.stop();
});

describe('the feature-gate table', () => {
  it('lets each feature through from its tier up and refuses it just below, with 403 tier_required', () => {
    for (const [feature, required] of Object.entries(FEATURE_TIERS) as [Feature, (typeof TIERS)[number]][]) {
      const at = TIER_ORDER.indexOf(required);
      for (const tier of TIER_ORDER.slice(at)) expect(() => requireFeature(tier, feature)).not.toThrow();
      if (at > 0) {
        let err: unknown;
        try {
          requireFeature(TIER_ORDER[at - 1], feature);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(DomainError);
        expect((err as DomainError).status).toBe(403);
        expect((err as DomainError).toBody()).toEqual({ error: { code: 'tier_required', message: expect.any(String), feature, requiredTier: required } });
      }
    }
  });

  it('follows the spec table', () => {
    const row = (feature: Feature) => TIER_ORDER.map((t) => hasFeature(t, feature));
    expect(row('bulk_replay')).toEqual([false, true, true, true, true]);
    expect(row('strict_fifo')).toEqual([false, false, true, true, true]);
    expect(row('audit_log_api')).toEqual([false, false, false, true, true]);
    expect(row('automation_egress_policies')).toEqual([false, false, false, false, true]);
    expect(TIER_QUOTAS.free).toMatchObject({ monthly_deliveries: 5000, ingest_rate: 3, stored_payload_bytes: 50 * 1024 ** 2, file_storage_bytes: 0, backlog_depth: 500, replay_volume: 50 });
    expect(TIER_QUOTAS.enterprise).toMatchObject({ monthly_deliveries: 10_000_000, ingest_rate: 100, backlog_depth: 50_000, replay_volume: 50_000 });
  });
});

describe('overage (PATCH /v1/project)', () => {
  it('is refused on Free with 403 tier_required, whichever value is sent', async () => {
    const { apiKey } = await app.project('free');
    for (const overageEnabled of [true, false]) {
      const res = await app.api(apiKey, 'PATCH', '/v1/project', { overageEnabled });
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ error: { code: 'tier_required', message: expect.any(String), feature: 'overage', requiredTier: 'starter' } });
    }
    expect((await app.api(apiKey, 'GET', '/v1/project')).body.overageEnabled).toBe(false);
  });

  it('can be switched on and off from Starter', async () => {
    const { apiKey } = await app.project('starter');
    const on = await app.api(apiKey, 'PATCH', '/v1/project', { overageEnabled: true });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ tier: 'starter', overageEnabled: true });
    expect((await app.api(apiKey, 'GET', '/v1/project')).body.overageEnabled).toBe(true);
    const off = await app.api(apiKey, 'PATCH', '/v1/project', { overageEnabled: false });
    expect(off.body.overageEnabled).toBe(false);
  });

  it('is switched off when the project moves to Free', async () => {
    const { apiKey, projectId } = await app.project('pro');
    await app.api(apiKey, 'PATCH', '/v1/project', { overageEnabled: true });
    await setProjectTier(app.rt, projectId, 'free');
    expect((await app.api(apiKey, 'GET', '/v1/project')).body).toMatchObject({ tier: 'free', overageEnabled: false });
  });

  it('is refused over GraphQL too, with the same code in extensions', async () => {
    const { apiKey } = await app.project('free');
    const res = await app.api(apiKey, 'POST', '/graphql', { query: 'mutation { updateProject(overageEnabled: true) { overageEnabled } }' });
    expect(res.body.errors[0].extensions).toMatchObject({ code: 'tier_required', feature: 'overage', requiredTier: 'starter' });
  });
});

describe('audit log API', () => {
  it('is refused on Pro with 403 tier_required and served from Business', async () => {
    const pro = await app.project('pro');
    const denied = await app.api(pro.apiKey, 'GET', '/v1/project/audit-logs');
    expect(denied.status).toBe(403);
    expect(denied.body).toEqual({ error: { code: 'tier_required', message: expect.any(String), feature: 'audit_log_api', requiredTier: 'business' } });
    const gql = await app.api(pro.apiKey, 'POST', '/graphql', { query: '{ auditLogsConnection(first: 5) { edges { node { id } } } }' });
    expect(gql.body.errors[0].extensions).toMatchObject({ code: 'tier_required', requiredTier: 'business' });

    const business = await app.project('business');
    const ok = await app.api(business.apiKey, 'GET', '/v1/project/audit-logs');
    expect(ok.status).toBe(200);
    expect(ok.body.items.length).toBeGreaterThan(0);
  });
});

describe('Enterprise custom quotas', () => {
  it('are refused below Enterprise and shown as the effective quotas on Enterprise', async () => {
    const business = await app.project('business');
    const err = await rejection(setProjectQuota(app.rt, business.projectId, 'ingest_rate', '500'));
    expect(err.toBody().error).toMatchObject({ code: 'invalid_request', param: 'quota' });

    const ent = await app.project('enterprise');
    await setProjectQuota(app.rt, ent.projectId, 'ingest_rate', '500');
    await setProjectQuota(app.rt, ent.projectId, 'stored_payload_bytes', String(40 * 1024 ** 3));
    const res = await app.api(ent.apiKey, 'GET', '/v1/project');
    expect(res.body.quotas).toEqual({ ...TIER_QUOTAS.enterprise, ingest_rate: 500, stored_payload_bytes: 40 * 1024 ** 3 });
    expect((await rejection(setProjectQuota(app.rt, ent.projectId, 'ingest_rate', '-1'))).details.param).toBe('value');
    expect((await rejection(setProjectQuota(app.rt, ent.projectId, 'nope', '1'))).details.param).toBe('quota');
  });
});
