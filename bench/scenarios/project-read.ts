import type { Scenario } from '../scenario.ts';

const projectRead: Scenario = {
  name: 'project-read',
  description:
    'GET /v1/project with the API key: authentication (key hash lookup), SOFA over GraphQL, one Prisma read, JSON. ' +
    'Compared with the bare indexed read.',
  baseline: 'read',
  async run(ctx) {
    const headers = { authorization: `Bearer ${ctx.apiKey}` };
    // autocannon only counts statuses: check once that the route answers what we think it does.
    const res = await fetch(`${ctx.serviceUrl}/v1/project`, { headers, signal: AbortSignal.timeout(10_000) });
    const body: any = await res.json();
    if (res.status !== 200 || body?.id !== ctx.projectId) throw new Error(`GET /v1/project answered ${res.status} ${JSON.stringify(body)}`);
    const figures = await ctx.autocannon({ path: '/v1/project', headers });
    return [{ name: 'project-read', ...figures }];
  },
};

export default projectRead;
