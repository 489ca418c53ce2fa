-- Written by hand (Prisma's schema language cannot express triggers).
--
-- Ingest in a process whose job runner drains the webhook may claim the new delivery for that
-- drain in its own statement (src/deliveries/batch-run.ts, DirectClaim): the attempt then starts
-- with the webhook's settings as the drain's last batch claim read them, and the statement stores
-- the event only while the webhook's config_version is still the one that claim read. So every
-- setting an attempt uses raises config_version too (besides those ingest's lookup reads:
-- migrations ingest_target_version, provider_packs, producers): maxInFlight, the timeout, the
-- retry policy, throttling, the custom headers and the transform. Raising it also tells every
-- process (webhooks_ingest_target_changed), whose ingest lookups and drains then read it again.
DROP TRIGGER webhooks_config_version ON webhooks;
CREATE TRIGGER webhooks_config_version
  BEFORE UPDATE OF status, routing, quota_overrides, default_delay_seconds, delivery_mode, public_id, project_id, provider_pack, dedupe_window_seconds,
                   idempotency_window_seconds, form_access, form_allowed_origins,
                   max_in_flight, timeout_ms, retry_policy, throttle_rate_per_second, custom_headers, transform ON webhooks
  FOR EACH ROW EXECUTE FUNCTION webhook_config_changed();
