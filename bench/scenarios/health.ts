import type { Scenario } from '../scenario.ts';

const health: Scenario = {
  name: 'health',
  description: 'GET /healthz: the HTTP server alone (routing and a JSON answer, no database, no auth). The ceiling for every other route.',
  async run(ctx) {
    const figures = await ctx.autocannon({ path: '/healthz' });
    return [{ name: 'health', ...figures }];
  },
};

export default health;
