// The dashboard in a real browser: Debian's Chromium driven by playwright-core (no browser
// download). Skipped, with a notice, when Chromium is not installed (`apt-get install -y chromium`),
// except under CI (CI set): there a missing Chromium fails the run.
import { existsSync } from 'node:fs';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser } from '../src/users/service.ts';
import { startTestApp, waitFor, type TestApp } from './support/app.ts';
import { startReceiver } from './support/receiver.ts';
import { createWebhook, ingest, ingestingProject } from './support/webhooks.ts';

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((p) => p && existsSync(p));
const OUT = 'test-results/dashboard';
/** UPDATE_README_IMAGES=1 also writes the README's screenshots to docs/images. */
const README_IMAGES = process.env.UPDATE_README_IMAGES === '1';

if (!CHROMIUM) {
  if (process.env.CI) throw new Error('[dashboard e2e] no Chromium found, and CI is set: the browser tests must run in CI (apt-get install -y chromium, or set CHROMIUM_PATH).');
  console.warn('\n[dashboard e2e] SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH).\n');
}

describe.skipIf(!CHROMIUM)('dashboard in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let apiKey: string;
  let projectId: string;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const email = 'operator@example.com';
  const password = 'operator password 1';
  let webhook: { id: string; publicId: string; ingestSecret: string };
  let deliveryId: string;

  const shot = async (name: string) => {
    await page.screenshot({ path: path.join(OUT, `${name}.png`), fullPage: true });
  };
  const gql = async (query: string, variables: Record<string, unknown> = {}) => {
    const res = await app.api(apiKey, 'POST', '/graphql', { query, variables });
    if (res.body.errors) throw new Error(JSON.stringify(res.body.errors));
    return res.body.data;
  };

  beforeAll(async () => {
    await mkdir(OUT, { recursive: true });
    app = await startTestApp({ worker: true });
    ({ apiKey, projectId } = await ingestingProject(app));
    await createUser(app.rt, { email, projectId, password });
    receiver = await startReceiver(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"received":true}' }));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
    context = await browser.newContext({ baseURL: app.url, viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);
  });
  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await app?.stop();
  });

  it('refuses a wrong password with the form again', async () => {
    await page.goto('/dashboard');
    await expect.poll(() => page.url()).toContain('/dashboard/login');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill('not my password');
    const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/dashboard/login') && r.request().method() === 'POST'), page.getByRole('button', { name: 'Sign in' }).click()]);
    expect(response.status()).toBe(401);
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor();
    await shot('01-wrong-password');
  });

  it('signs in, and the first load is small and quick (measured)', async () => {
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/dashboard/webhooks');

    // A new browser context (empty cache), signed in: compressed JavaScript bytes of the first
    // load (Resource Timing's encodedBodySize) and the time until the page answers input.
    const coldContext = await browser.newContext({ baseURL: app.url, viewport: { width: 1280, height: 900 }, storageState: await context.storageState() });
    const cold = await coldContext.newPage();
    await cold.goto('/dashboard/webhooks');
    await cold.getByText('No webhooks yet').waitFor();
    const tti = await cold.evaluate(() => performance.now());
    await cold.getByRole('button', { name: 'New webhook' }).click();
    await cold.getByLabel('Destination URL').waitFor();
    const jsBytes = await cold.evaluate(() =>
      performance
        .getEntriesByType('resource')
        .filter((e) => new URL(e.name).pathname.endsWith('.js'))
        .reduce((sum, e) => sum + (e as PerformanceResourceTiming).encodedBodySize, 0),
    );
    const metrics = { firstLoadJsCompressedBytes: jsBytes, timeToInteractiveMs: Math.round(tti) };
    console.log(`[dashboard e2e] first load: ${(jsBytes / 1024).toFixed(1)} KB compressed JS, interactive after ${metrics.timeToInteractiveMs} ms`);
    await writeFile(path.join(OUT, 'metrics.json'), JSON.stringify(metrics, null, 2));
    await coldContext.close();
    expect(jsBytes).toBeGreaterThan(0);
    expect(jsBytes).toBeLessThan(300 * 1024);
    await shot('02-signed-in');
  });

  it('creates a webhook, with its secrets shown once', async () => {
    await page.getByRole('button', { name: 'New webhook' }).click();
    await page.getByLabel('Name').fill('Orders');
    await page.getByLabel('Destination URL').fill(`${receiver.url}/hook`);
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByText('Webhook “Orders” created').waitFor();
    const ingestSecret = await page.getByLabel('Ingest secret', { exact: true }).textContent();
    const ingestUrl = await page.getByLabel('Ingest URL', { exact: true }).textContent();
    expect(ingestSecret).toMatch(/^whsec_/);
    const publicId = ingestUrl!.split('/').pop()!;
    const { webhooks } = await gql('{ webhooks { items { id publicId name } } }');
    const row = webhooks.items.find((w: any) => w.publicId === publicId);
    expect(row.name).toBe('Orders');
    webhook = { id: row.id, publicId, ingestSecret: ingestSecret! };
    await page.getByRole('row', { name: /Orders/ }).waitFor();
    await shot('03-webhook-created');
  });

  it('shows an event’s delivery live, with its attempts', async () => {
    await page.goto(`/dashboard/deliveries?webhookId=${webhook.id}`);
    await page.getByText('No deliveries match').waitFor();
    await page.locator('.live:not(.off)').waitFor();
    // Give the subscription a moment to be registered server-side (it is lazy: opened on first use).
    await waitFor(async () => (await page.evaluate(() => performance.getEntriesByType('resource').length)) > 0, 2_000);
    await new Promise((r) => setTimeout(r, 500));
    const sent = await ingest(app, webhook.publicId, { headers: { authorization: `Bearer ${webhook.ingestSecret}` }, body: '{"type":"order.created","id":1}' });
    expect(sent.status).toBe(202);
    deliveryId = sent.body.deliveryId;
    // No reload: the row arrives over graphql-ws, then turns succeeded.
    const row = page.locator(`tr[data-delivery-id="${deliveryId}"]`);
    await row.waitFor();
    await row.getByText('succeeded').waitFor();
    await shot('04-delivery-live');

    await row.getByRole('link', { name: deliveryId }).click();
    await page.getByRole('heading', { name: 'Attempt 1' }).waitFor();
    await page.getByText('HTTP 200').waitFor();
    await page.getByText('{"received":true}').waitFor();
    await shot('05-delivery-attempts');
    if (README_IMAGES) await page.screenshot({ path: 'docs/images/dashboard-delivery-attempts.png' });
  });

  it('replays the delivery', async () => {
    await page.getByRole('button', { name: 'Replay' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Replay' }).click();
    await page.getByText('Replay queued').waitFor();
    const replay = await waitFor(async () => {
      const { deliveries } = await gql('query($w: String) { deliveries(webhookId: $w) { items { id replayOf status } } }', { w: webhook.id });
      return deliveries.items.find((d: any) => d.replayOf === deliveryId && d.status === 'succeeded');
    }, 15_000);
    expect(replay).toBeTruthy();
    expect(receiver.received.length).toBeGreaterThanOrEqual(2);
    await shot('06-replayed');
  });

  it('shows the webhook’s own recent deliveries on its page, a new one live', async () => {
    await page.goto(`/dashboard/webhooks/${webhook.id}`);
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    const recent = page.locator('#recent-deliveries');
    await recent.locator(`tr[data-delivery-id="${deliveryId}"]`).waitFor();
    await recent.locator('.live:not(.off)').waitFor();
    // Give the subscription a moment to be registered server-side (as for the deliveries page).
    await new Promise((r) => setTimeout(r, 500));
    const sent = await ingest(app, webhook.publicId, { headers: { authorization: `Bearer ${webhook.ingestSecret}` }, body: '{"type":"order.created","id":2}' });
    expect(sent.status).toBe(202);
    // No reload: the row arrives over graphql-ws, then turns succeeded.
    const row = recent.locator(`tr[data-delivery-id="${sent.body.deliveryId}"]`);
    await row.waitFor();
    await row.getByText('succeeded').waitFor();
    await recent.getByRole('link', { name: 'All deliveries' }).waitFor();
    await shot('06b-webhook-recent-deliveries');
  });

  it('rotates the ingest secret, showing the new one once', async () => {
    await page.goto(`/dashboard/webhooks/${webhook.id}`);
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Rotate ingest secret' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Rotate ingest secret' }).click();
    const secret = await page.getByLabel('New ingest secret', { exact: true }).textContent();
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(webhook.ingestSecret);
    expect((await ingest(app, webhook.publicId, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(202);
    await shot('07-secret-rotated');
    if (README_IMAGES) {
      await page.goto('/dashboard/webhooks');
      await page.getByRole('row', { name: /Orders/ }).waitFor();
      await page.screenshot({ path: 'docs/images/dashboard-webhooks.png' });
      await page.goto(`/dashboard/webhooks/${webhook.id}`);
    }
  });

  it('edits every part of a webhook: settings, a destination, a routing rule, a transform; the probe shows the matched rule and the transformed payload', async () => {
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    await page.getByLabel('Max in flight').fill('7');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Saved.', { exact: true }).waitFor();
    expect((await gql('query($id: ID!) { webhook(id: $id) { maxInFlight } }', { id: webhook.id })).webhook.maxInFlight).toBe(7);

    await page.getByText('Add a destination').click();
    await page.locator('form').filter({ has: page.getByRole('button', { name: 'Add destination' }) }).getByLabel('Name').fill('archive');
    await page.getByLabel('Config (JSON)').fill(JSON.stringify({ url: `${receiver.url}/archive` }));
    await page.getByRole('button', { name: 'Add destination' }).click();
    await page.getByRole('heading', { name: 'archive', level: 3 }).waitFor();
    // An API error is shown as the contract's message: the same name again.
    const again = await app.api(apiKey, 'POST', '/graphql', {
      query: 'mutation($id: ID!, $c: JSON!) { createDestination(id: $id, name: "archive", type: "webhook", config: $c) { id } }',
      variables: { id: webhook.id, c: { url: `${receiver.url}/archive` } },
    });
    const message = again.body.errors[0].message as string;
    await page.locator('form').filter({ has: page.getByRole('button', { name: 'Add destination' }) }).getByLabel('Name').fill('archive');
    await page.getByLabel('Config (JSON)').fill(JSON.stringify({ url: `${receiver.url}/archive` }));
    await page.getByRole('button', { name: 'Add destination' }).click();
    await page.getByRole('alert').filter({ hasText: message }).waitFor();
    await page.getByText('Add a destination').click();

    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByLabel('Destination', { exact: true }).selectOption({ label: 'archive' });
    await page.getByLabel('Match (JSON)').fill('{"body.type": "order.created"}');
    await page.getByRole('button', { name: 'Save rules' }).click();
    await page.getByText('Rules saved.').waitFor();

    await page.getByLabel('Kind').selectOption('jsonata');
    await page.getByLabel('JSONata expression').fill('{"kind": type, "amount": data.amount * 2}');
    await page.getByRole('button', { name: 'Save transform' }).click();
    await page.getByText('Transform saved.').waitFor().catch(async (e) => {
      await shot('08-transform-failed');
      throw new Error(`${e.message}; alerts: ${await page.getByRole('alert').allTextContents()}`);
    });

    await page.getByLabel('Body (JSON)').fill('{"type": "order.created", "data": {"amount": 21}}');
    await page.getByRole('button', { name: 'Run probe' }).click();
    const result = page.getByTestId('probe-result');
    await result.getByText('rule-1 (priority 10)').waitFor();
    await result.getByText('archive (webhook)').waitFor();
    await result.getByText('"amount": 42').waitFor();
    await shot('08-probe');

    // Back to a plain setup for the next steps.
    await gql('mutation($id: ID!) { setWebhookRouting(id: $id, rules: []) { rules { name } } }', { id: webhook.id });
    await gql('mutation($id: ID!) { setWebhookTransform(id: $id, kind: null) { kind } }', { id: webhook.id });
    await page.reload();
  });

  it('edits the email sender allowlist and the browser-form settings, with the API\'s errors inline', async () => {
    await page.goto(`/dashboard/webhooks/${webhook.id}`);
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    await page.getByText('No sender patterns').waitFor();
    await page.getByRole('textbox', { name: 'Sender pattern', exact: true }).fill('Alerts@Example.com');
    await page.getByRole('button', { name: 'Add sender' }).click();
    const row = page.getByRole('table', { name: 'Sender patterns' }).getByRole('row', { name: /alerts@example\.com/ });
    await row.waitFor();
    // The same pattern again: the API's 409, shown in the section.
    await page.getByRole('textbox', { name: 'Sender pattern', exact: true }).fill('alerts@example.com');
    await page.getByRole('button', { name: 'Add sender' }).click();
    await page.getByRole('alert').filter({ hasText: 'already_exists' }).waitFor();
    const list = async () => (await gql('query($id: ID!) { webhookEmailAllowlist(id: $id) { items { id pattern } } }', { id: webhook.id })).webhookEmailAllowlist.items;
    expect((await list()).map((e: any) => e.pattern)).toEqual(['alerts@example.com']);

    // An origin with a path: the API's 400, shown in the section; then a valid one.
    await page.getByLabel('Allowed origins').fill('https://www.example.com/contact');
    await page.getByRole('button', { name: 'Save form settings' }).click();
    await page.locator('#browser-forms').getByRole('alert').waitFor();
    await page.getByLabel('Form access').selectOption('public');
    await page.getByLabel('Allowed origins').fill('https://www.example.com\nhttp://localhost:8080');
    await page.getByRole('button', { name: 'Save form settings' }).click();
    await page.getByText('Form settings saved.').waitFor();
    const saved = (await gql('query($id: ID!) { webhook(id: $id) { formAccess formAllowedOrigins } }', { id: webhook.id })).webhook;
    expect(saved).toEqual({ formAccess: 'public', formAllowedOrigins: ['https://www.example.com', 'http://localhost:8080'] });
    await shot('08-allowlist-and-forms');
    // Loaded again, the section shows what is saved (a save of the origins alone keeps public access).
    await page.reload();
    await page.getByLabel('Allowed origins').waitFor();
    expect(await page.getByLabel('Form access').inputValue()).toBe('public');

    await row.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No sender patterns').waitFor();
    expect(await list()).toEqual([]);
    // Back to the defaults for the next steps.
    await gql('mutation($id: ID!) { updateWebhook(id: $id, formAccess: "secret", formAllowedOrigins: ["*"]) { id } }', { id: webhook.id });
    await page.reload();
  });

  it('sets the idempotency window and a provider secret\'s grace period; shows a delivery\'s idempotency key and filters by it', async () => {
    await page.goto(`/dashboard/webhooks/${webhook.id}`);
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    await page.getByLabel('Idempotency window (s)').fill('3600');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Saved.', { exact: true }).waitFor();
    expect((await gql('query($id: ID!) { webhook(id: $id) { idempotencyWindowSeconds } }', { id: webhook.id })).webhook.idempotencyWindowSeconds).toBe(3600);

    // A provider secret rotated with a grace period of its own: both versions listed in Secrets.
    await gql('mutation($id: ID!) { setWebhookProvider(id: $id, provider: "stripe", secret: "whsec_dashboard_one") { provider } }', { id: webhook.id });
    await page.reload();
    await page.getByRole('table', { name: 'Secret versions' }).getByRole('row', { name: /provider\s*1\s*current/ }).waitFor();
    const pack = page.locator('#provider-pack');
    await pack.getByLabel('Tolerance (s)').waitFor();
    expect(await pack.getByLabel('Provider', { exact: true }).inputValue()).toBe('stripe');
    await pack.getByLabel('Provider secret').fill('whsec_dashboard_two');
    await pack.getByLabel("Previous secret's grace (s)").fill('600');
    await pack.getByRole('button', { name: 'Save provider pack' }).click();
    const providerVersions = async () =>
      (await gql('query($id: ID!) { webhookSecrets(id: $id) { items { kind version state expiresAt } } }', { id: webhook.id })).webhookSecrets.items.filter((v: any) => v.kind === 'provider');
    const versions = await waitFor(async () => ((await providerVersions()).length === 2 ? providerVersions() : null), 10_000);
    expect(versions.map((v: any) => [v.version, v.state])).toEqual([
      [2, 'current'],
      [1, 'grace'],
    ]);
    const graceLeft = Date.parse(versions[1].expiresAt) - Date.now();
    expect(graceLeft).toBeGreaterThan(500_000);
    expect(graceLeft).toBeLessThanOrEqual(600_000);
    await page.getByRole('table', { name: 'Secret versions' }).getByRole('row', { name: /provider\s*1\s*grace/ }).waitFor();
    await gql('mutation($id: ID!) { setWebhookProvider(id: $id, provider: null) { provider } }', { id: webhook.id });

    // A delivery shows the producer's key, which links to the deliveries with it (no bulk replay there: it cannot select by key).
    const headers = { authorization: `Bearer ${webhook.ingestSecret}`, 'idempotency-key': 'dashboard-order-9' };
    const keyed = await ingest(app, webhook.publicId, { headers, body: '{"type":"order.created","id":9}' });
    expect(keyed.body.status).toBe('queued');
    expect((await ingest(app, webhook.publicId, { headers, body: '{"type":"order.created","id":9}' })).body.status).toBe('duplicate');
    await page.goto(`/dashboard/deliveries/${keyed.body.deliveryId}`);
    await page.getByRole('link', { name: 'dashboard-order-9' }).click();
    await expect.poll(() => page.url()).toContain('idempotencyKey=dashboard-order-9');
    await page.locator(`tr[data-delivery-id="${keyed.body.deliveryId}"]`).waitFor();
    expect(await page.locator('tr[data-delivery-id]').count()).toBe(1);
    expect(await page.getByLabel('Idempotency key').inputValue()).toBe('dashboard-order-9');
    expect(await page.getByRole('button', { name: 'Replay all matching' }).count()).toBe(0);
    await shot('08-idempotency-key');
    await gql('mutation($id: ID!) { updateWebhook(id: $id, idempotencyWindowSeconds: 86400) { id } }', { id: webhook.id });
    // Back on the webhook's page for the next steps.
    await page.goto(`/dashboard/webhooks/${webhook.id}`);
  });

  it('pauses and resumes the webhook', async () => {
    await page.getByRole('heading', { name: 'Orders', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    await page.locator('.page-header .badge', { hasText: 'paused' }).waitFor();
    const paused = await ingest(app, webhook.publicId, { headers: { authorization: `Bearer ${webhook.ingestSecret}` } });
    expect(paused.status).toBe(409);
    expect(paused.body.error.code).toBe('webhook_paused');
    await shot('08-paused');
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('button', { name: 'Pause' }).waitFor();
    await page.locator('.page-header .badge', { hasText: 'active' }).waitFor();
    expect((await gql('query($id: ID!) { webhook(id: $id) { status } }', { id: webhook.id })).webhook.status).toBe('active');
  });

  it('archives, then destroys a webhook only once its name is typed', async () => {
    const hook = await createWebhook(app, apiKey, { name: 'Old hook', url: `${receiver.url}/old` });
    await page.goto(`/dashboard/webhooks/${hook.id}`);
    await page.getByRole('heading', { name: 'Old hook', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Archive' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Archive' }).click();
    await page.locator('.page-header .badge', { hasText: 'archived' }).waitFor();
    await page.getByRole('button', { name: 'Destroy' }).click();
    const dialog = page.getByRole('dialog');
    const confirm = dialog.getByRole('button', { name: 'Destroy forever' });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel('Type Old hook to confirm').fill('Old hook');
    await shot('09-destroy-confirm');
    await confirm.click();
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
    const gone = await app.api(apiKey, 'POST', '/graphql', { query: 'query($id: ID!) { webhook(id: $id) { id } }', variables: { id: hook.id } });
    expect(gone.body.errors[0].extensions.code).toBe('not_found');
  });

  it('re-drives a DLQ entry', async () => {
    const failing = await startReceiver(() => ({ status: 400, body: 'bad payload' }));
    try {
      const hook = await createWebhook(app, apiKey, { name: 'Failing', url: `${failing.url}/hook`, retryPolicy: { maxAttempts: 1 } });
      const sent = await ingest(app, hook.publicId, { headers: { authorization: `Bearer ${hook.ingestSecret}` } });
      expect(sent.status).toBe(202);
      const entry = await waitFor(async () => (await gql('query($w: String) { dlq(webhookId: $w) { items { id deliveryId } } }', { w: hook.id })).dlq.items[0], 15_000);
      await page.goto(`/dashboard/dlq?webhookId=${hook.id}`);
      const row = page.locator(`tr[data-dlq-id="${entry.id}"]`);
      await row.waitFor();
      await shot('09-dlq');
      await row.getByRole('button', { name: `Re-drive ${entry.id}` }).click();
      await page.getByText('Re-drive queued').waitFor();
      const redriven = await waitFor(async () => {
        const { dlq } = await gql('query($w: String) { dlq(webhookId: $w, state: "all") { items { id redrivenAt redriveDeliveryId } } }', { w: hook.id });
        return dlq.items.find((e: any) => e.id === entry.id && e.redrivenAt);
      }, 10_000);
      expect(redriven.redriveDeliveryId).toBeTruthy();
      await waitFor(() => failing.received.length >= 2, 10_000);
      await shot('10-dlq-redriven');
    } finally {
      await failing.close();
    }
  });

  it('shows a message arriving live in the conversations view; sends one and reacts', async () => {
    const { createContact } = await gql('mutation { createContact(username: "ana", phone_number: "+15550001111", display_name: "Ana") { id conversation_id } }');
    await page.goto(`/dashboard/conversations/${createContact.id}`);
    await page.getByRole('heading', { name: 'Conversation with Ana' }).waitFor();
    await page.getByText('No messages yet').waitFor();
    await page.locator('.live:not(.off)').waitFor();
    await new Promise((r) => setTimeout(r, 500));
    // Sent through the API by someone else: it appears without a reload.
    const { sendMessage } = await gql('mutation($c: ID!) { sendMessage(conversation_id: $c, message: "Hello from the API") { id } }', { c: createContact.conversation_id });
    const arrived = page.locator(`li[data-message-id="${sendMessage.id}"]`);
    await arrived.getByText('Hello from the API').waitFor();
    // Sent and reacted to from the dashboard.
    await page.getByLabel('Message', { exact: true }).fill('Hi Ana, from the dashboard');
    await page.getByRole('button', { name: 'Send' }).click();
    await page.getByText('Hi Ana, from the dashboard').waitFor();
    await arrived.getByRole('button', { name: 'React like to this message' }).click();
    await arrived.locator('.badge', { hasText: 'like 1' }).waitFor();
    const { messages } = await gql('query($c: ID) { messages(conversation_id: $c) { data { message reactions } } }', { c: createContact.conversation_id });
    expect(messages.data.map((m: any) => m.message)).toEqual(['Hi Ana, from the dashboard', 'Hello from the API']);
    expect(messages.data[1].reactions).toEqual([{ like: [email] }]);
    await shot('11-conversation-live');
  });

  it('is usable on a phone: the menu opens and navigates', async () => {
    const phone = await browser.newContext({ baseURL: app.url, viewport: { width: 390, height: 844 }, storageState: await context.storageState(), isMobile: true, hasTouch: true });
    try {
      const p = await phone.newPage();
      await p.goto('/dashboard/webhooks');
      await p.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
      expect(await p.getByRole('navigation', { name: 'Main' }).isVisible()).toBe(false);
      await p.getByRole('button', { name: 'Menu' }).click();
      await p.getByRole('link', { name: 'Dead-letter queue' }).click();
      await p.getByRole('heading', { name: 'Dead-letter queue', level: 1 }).waitFor();
      // No horizontal scrolling of the page itself.
      expect(await p.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await p.screenshot({ path: path.join(OUT, '12-phone.png'), fullPage: true });
      // The later pages too: metrics (charts, stat tiles), automations, drains, alerts.
      for (const [href, title] of [['/dashboard/metrics', 'Metrics'], ['/dashboard/automations', 'Automations'], ['/dashboard/drains', 'Event drains'], ['/dashboard/alerts', 'Alerts']]) {
        await p.goto(href);
        await p.getByRole('heading', { name: title, level: 1 }).waitFor();
        expect(await p.evaluate(() => document.documentElement.scrollWidth), href).toBeLessThanOrEqual(390);
      }
      await p.goto(`/dashboard/metrics?webhookId=${webhook.id}`);
      await p.getByRole('heading', { name: 'Backlog' }).waitFor();
      expect(await p.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      await p.screenshot({ path: path.join(OUT, '12-phone-metrics.png'), fullPage: true });
    } finally {
      await phone.close();
    }
  });

  it('can be used with the keyboard alone: skip link, focus on the page heading after navigation', async () => {
    await page.goto('/dashboard/webhooks');
    await page.getByRole('heading', { name: 'Webhooks', level: 1 }).waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.getByRole('link', { name: 'Deliveries' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Deliveries', level: 1 }).waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('page-title');
    await shot('12-keyboard-focus');
  });

  it('runs the other management pages: a schedule fired now, an API key created once and revoked, usage, provider packs, the audit log', async () => {
    await page.goto(`/dashboard/schedules?webhookId=${webhook.id}`);
    await page.getByText('No schedules on this webhook').waitFor();
    await page.getByLabel('Name').fill('nightly');
    await page.getByLabel('Cron').fill('0 3 * * *');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.getByRole('heading', { name: 'nightly', level: 3 }).waitFor();
    await page.getByRole('button', { name: 'Fire now' }).click();
    await page.getByText(/Fired: event evt_/).waitFor();
    await shot('13-schedules');

    await page.goto('/dashboard/api-keys');
    await page.getByLabel('Name').fill('ci');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByLabel('New API key', { exact: true }).textContent();
    expect((await app.api(key!, 'GET', '/v1/project')).status).toBe(200);
    await page.getByRole('button', { name: 'Revoke ci' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('row', { name: /ci/ }).getByText('revoked').waitFor();
    expect((await app.api(key!, 'GET', '/v1/project')).status).toBe(401);

    await page.goto('/dashboard/usage');
    await page.getByText(/monthly deliveries: \d+ of/).waitFor();
    await page.goto('/dashboard/providers');
    await page.getByRole('cell', { name: /Stripe/ }).first().waitFor();
    await page.goto('/dashboard/audit-log');
    // The dashboard user is the actor of what was done here.
    const { id: userId } = await app.rt.db.prisma.dashboardUser.findUniqueOrThrow({ where: { email } });
    await page.getByRole('cell', { name: userId }).first().waitFor();
    await shot('14-audit-log');
  });

  it('shows a webhook’s metrics and backlog after its deliveries, per window', async () => {
    await page.goto(`/dashboard/metrics?webhookId=${webhook.id}&window=1h`);
    await page.getByRole('heading', { name: 'Metrics', level: 1 }).waitFor();
    const stat = (label: string) => page.locator('dl.stats > div', { has: page.locator('dt', { hasText: new RegExp(`^${label}$`) }) }).locator('dd');
    // The earlier deliveries of “Orders” all succeeded (a delivery and its replay at least).
    await expect.poll(async () => Number(await stat('Succeeded').textContent()), { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    expect(Number(await stat('Ingested').textContent())).toBeGreaterThanOrEqual(1);
    expect(await stat('Success rate').textContent()).toBe('100 %');
    expect(await stat('p50').textContent()).toMatch(/\d+(\.\d+)? m?s$/);
    await page.getByRole('row', { name: /^2xx \d+/ }).waitFor();
    expect(await page.getByRole('img', { name: /^Deliveries per minute over 1h: \d+ succeeded, 0 failed$/ }).count()).toBe(1);
    await page.getByRole('img', { name: /Highest backlog depth/ }).waitFor();
    // Another window: the same figures, from the 900 s roll-ups.
    await page.getByRole('navigation', { name: 'Window' }).getByRole('link', { name: '24h' }).click();
    await page.getByRole('img', { name: /^Deliveries per 15 minutes over 24h/ }).waitFor();
    const before = Number(await stat('Succeeded').textContent());
    expect(before).toBeGreaterThanOrEqual(2);
    await page.locator('.live:not(.off)').waitFor();
    await new Promise((r) => setTimeout(r, 500));
    // Live: one more delivery, and the figures follow without a reload.
    expect((await ingest(app, webhook.publicId, { headers: { authorization: `Bearer ${webhook.ingestSecret}` } })).status).toBe(202);
    await expect.poll(async () => Number(await stat('Succeeded').textContent()), { timeout: 15_000 }).toBe(before + 1);
    await shot('20-metrics');
    // The webhooks list's bars come from the same roll-ups.
    await page.goto('/dashboard/webhooks');
    await page.getByRole('img', { name: /^\d+ events in the last 24 hours/ }).first().waitFor();
  });

  it('creates an automation, adds a version, sees its run, disables it', async () => {
    await page.goto('/dashboard/automations');
    await page.getByText('No automations yet').waitFor();
    // The egress policy (Enterprise, which this project is).
    await page.getByLabel('Allowed hosts').fill('api.example.com\nhooks.example.org');
    await page.getByRole('button', { name: 'Save egress policy' }).click();
    await page.getByText('Egress policy saved.').waitFor();
    expect((await gql('{ egressPolicy { allowedHosts } }')).egressPolicy.allowedHosts).toEqual(['api.example.com', 'hooks.example.org']);
    await page.getByRole('button', { name: 'New automation' }).click();
    await page.getByLabel('Name').fill('enrich');
    await page.getByRole('button', { name: 'Create automation' }).click();
    await page.getByRole('heading', { name: 'enrich', level: 1 }).waitFor();
    const id = new URL(page.url()).pathname.split('/').pop()!;
    const code = page.getByLabel(/^Code \(editing v1/);
    await code.fill("export default (event) => ({ v: 2, type: event.body?.type });\n");
    await page.getByRole('button', { name: 'Add version' }).click();
    await page.getByText('Version 2 added.').waitFor();
    await page.getByLabel(/^Code \(editing v2/).waitFor();
    await page.getByText(/^v1 ·/).waitFor();
    const { automation } = await gql('query($id: ID!) { automation(id: $id) { currentVersion status } }', { id });
    expect(automation.currentVersion).toBe(2);

    // A test delivery through a webhook that pins it records a run.
    const hook = await createWebhook(app, apiKey, { name: 'Automated', url: `${receiver.url}/auto` });
    await gql('mutation($id: ID!, $a: String) { setWebhookTransform(id: $id, kind: "automation", automationId: $a) { kind } }', { id: hook.id, a: id });
    const probe = await gql('mutation($id: ID!) { testWebhookDelivery(id: $id, body: {type: "order.created"}) { automationRunId transformError payload } }', { id: hook.id });
    expect(probe.testWebhookDelivery.transformError).toBeNull();
    expect(probe.testWebhookDelivery.automationRunId).toBeTruthy();
    await page.getByRole('button', { name: 'Refresh' }).click();
    const run = page.getByRole('table', { name: 'Runs' }).getByRole('row').nth(1);
    await run.getByText('ok', { exact: true }).waitFor();
    await run.getByText('v2', { exact: true }).waitFor();
    await run.getByText('test delivery').waitFor();

    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByRole('button', { name: 'Enable' }).waitFor();
    await page.locator('.page-header .badge', { hasText: 'disabled' }).waitFor();
    expect((await gql('query($id: ID!) { automation(id: $id) { status } }', { id })).automation.status).toBe('disabled');
    await page.getByLabel('Name', { exact: true }).fill('enrich orders');
    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('heading', { name: 'enrich orders', level: 1 }).waitFor();
    await shot('21-automation');

    // Deleting it while a webhook pins it: the API's refusal is shown; unpinned, it goes.
    const del = async () => {
      await page.getByRole('button', { name: 'Delete' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByLabel('Type enrich orders to confirm').fill('enrich orders');
      await dialog.getByRole('button', { name: 'Delete forever' }).click();
    };
    await del();
    await page.getByRole('alert').waitFor();
    await gql('mutation($id: ID!) { setWebhookTransform(id: $id, kind: null) { kind } }', { id: hook.id });
    await del();
    await page.getByRole('heading', { name: 'Automations', level: 1 }).waitFor();
    await page.getByText('No automations yet').waitFor();
  });

  it('creates an event drain with its signing secret shown once; disables and rotates it', async () => {
    await page.goto('/dashboard/drains');
    await page.getByText('No drains yet').waitFor();
    await page.getByLabel('Name').fill('siem');
    await page.getByLabel('URL').fill(`${receiver.url}/drain`);
    await page.getByLabel('webhook.changed').uncheck();
    await page.getByRole('button', { name: 'Create drain' }).click();
    await page.getByText('Drain “siem” created.').waitFor();
    const secret = await page.getByLabel('Drain signing secret', { exact: true }).textContent();
    expect(secret!.length).toBeGreaterThan(16);
    const { drains } = await gql('{ drains { items { id name url events enabled } } }');
    expect(drains.items).toHaveLength(1);
    expect(drains.items[0]).toMatchObject({ name: 'siem', url: `${receiver.url}/drain`, enabled: true });
    expect(drains.items[0].events).not.toContain('webhook.changed');
    const card = page.locator(`li[data-drain-id="${drains.items[0].id}"]`);
    await card.getByRole('button', { name: 'Disable' }).click();
    await card.getByRole('button', { name: 'Enable' }).waitFor();
    expect((await gql('{ drains { items { enabled } } }')).drains.items[0].enabled).toBe(false);
    await card.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Rotate' }).click();
    await card.getByText('New signing secret.').waitFor();
    const rotated = await card.getByLabel('Drain signing secret', { exact: true }).textContent();
    expect(rotated).not.toBe(secret);
    await shot('22-drains');
    // Shown once: not after a reload.
    await page.reload();
    await page.locator(`li[data-drain-id="${drains.items[0].id}"]`).waitFor();
    expect(await page.getByLabel('Drain signing secret', { exact: true }).count()).toBe(0);
  });

  it('creates an alert rule and shows the (empty) dispatch history', async () => {
    await page.goto('/dashboard/alerts');
    await page.getByText('No alert rules').waitFor();
    await page.getByRole('button', { name: 'New alert rule' }).click();
    await page.getByLabel('Name').fill('Orders failing');
    await page.getByLabel('Webhook', { exact: true }).selectOption(webhook.id);
    await page.getByLabel('Threshold').fill('0.25');
    await page.getByLabel('Window (minutes)').fill('10');
    await page.getByLabel('Email channels').fill('oncall@example.com');
    await page.getByRole('button', { name: 'Create alert rule' }).click();
    await page.getByText('Alert rule “Orders failing” created').waitFor();
    expect(await page.getByLabel('Alert signing secret', { exact: true }).textContent()).toBeTruthy();
    await page.getByRole('heading', { name: 'Orders failing', level: 3 }).waitFor();
    await page.getByText('failure_rate ≥ 0.25 over 10 min').waitFor();
    const { alertRules } = await gql('{ alertRules { items { name webhookId condition { type threshold windowSeconds } channels cooldownSeconds enabled } } }');
    expect(alertRules.items).toEqual([
      { name: 'Orders failing', webhookId: webhook.id, condition: { type: 'failure_rate', threshold: 0.25, windowSeconds: 600 }, channels: [{ type: 'email', to: 'oncall@example.com' }], cooldownSeconds: 3600, enabled: true },
    ]);
    await page.getByText('No dispatches').waitFor();
    await page.getByLabel('State').selectOption('firing');
    await expect.poll(() => page.url()).toContain('state=firing');
    await shot('23-alerts');

    await page.getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Condition').selectOption('backlog_depth');
    await page.getByLabel('Threshold').fill('100');
    await page.getByRole('button', { name: 'Save rule' }).click();
    await page.getByText('backlog_depth ≥ 100', { exact: true }).waitFor();
    expect((await gql('{ alertRules { items { condition { type threshold } } } }')).alertRules.items[0].condition).toEqual({ type: 'backlog_depth', threshold: 100 });
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.getByText('No alert rules').waitFor();
    expect((await gql('{ alertRules { items { id } } }')).alertRules.items).toEqual([]);
  });

  it('shows the stored files of a form post on its delivery page', async () => {
    const form = new FormData();
    form.append('_secret', webhook.ingestSecret);
    form.append('note', 'see attached');
    form.append('doc', new Blob(['file content for the dashboard'], { type: 'text/plain' }), 'invoice.txt');
    const res = await fetch(`${app.url}/f/${webhook.publicId}`, { method: 'POST', body: form });
    expect(res.status).toBe(202);
    const { eventId } = await res.json();
    const delivery = await waitFor(async () => (await gql('query($w: String, $e: String) { deliveries(webhookId: $w, eventId: $e) { items { id } } }', { w: webhook.id, e: eventId })).deliveries.items[0], 10_000);
    const { eventFiles } = await gql('query($e: ID!) { eventFiles(eventId: $e) { id } }', { e: eventId });
    expect(eventFiles).toHaveLength(1);
    await page.goto(`/dashboard/deliveries/${delivery.id}`);
    const row = page.locator(`tr[data-file-id="${eventFiles[0].id}"]`);
    await row.getByText('invoice.txt').waitFor();
    await row.getByText('text/plain').waitFor();
    await row.getByText('30 B').waitFor();
    await page.getByText(`/v1/files/${eventFiles[0].id}`).waitFor();
    await shot('24-event-files');
  });

  it('a page of another origin cannot act with the session (CSRF)', async () => {
    const keysBefore = (await gql('{ apiKeys(limit: 100) { items { id } } }')).apiKeys.items.length;
    // Another origin on the same site (127.0.0.1, another port): the browser does send the cookie.
    const attacker = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><title>evil</title>
        <form id="f" method="post" action="${app.url}/graphql" enctype="text/plain" target="sink"><input name='{"query":"mutation { createApiKey(name: \\"evil\\") { key } }","x":"' value='"}'></form>
        <iframe name="sink"></iframe>
        <script>
          const body = JSON.stringify({ query: 'mutation { createApiKey(name: "evil") { key } }' });
          Promise.allSettled([
            fetch('${app.url}/graphql', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' }, body }),
            fetch('${app.url}/graphql', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json', 'x-csrf-token': 'guess' }, body }),
            fetch('${app.url}/graphql', { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body }),
            fetch('${app.url}/dashboard', { credentials: 'include' }).then((r) => r.text()),
          ]).then((results) => {
            document.getElementById('f').submit();
            document.title = 'done:' + results.map((r) => r.status).join(',');
          });
        </script>`);
    });
    await new Promise<void>((r) => attacker.listen(0, '127.0.0.1', () => r()));
    try {
      const evil = await context.newPage();
      await evil.goto(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`);
      await expect.poll(() => evil.title(), { timeout: 10_000 }).toMatch(/^done:/);
      // Every fetch failed or was unreadable: CORS gives no credentials, and /dashboard has no CORS at all.
      expect(await evil.title()).toBe('done:rejected,rejected,fulfilled,rejected');
      await new Promise((r) => setTimeout(r, 500));
      await evil.close();
    } finally {
      attacker.close();
    }
    expect((await gql('{ apiKeys(limit: 100) { items { id name } } }')).apiKeys.items.length).toBe(keysBefore);
    // Still signed in.
    await page.goto('/dashboard/api-keys');
    await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
    await shot('15-after-csrf-attempt');
  });

  it('signs out', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByText('You are signed out.').waitFor();
    await shot('16-signed-out');
    await page.goto('/dashboard/webhooks');
    await expect.poll(() => page.url()).toContain('/dashboard/login');
  });
});
