-- CreateTable
CREATE TABLE "event_drains" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "events" TEXT[],
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "secret_enc" TEXT NOT NULL,
    "previous_secret_enc" TEXT,
    "previous_expires_at" TIMESTAMP(3),
    "dropped_count" BIGINT NOT NULL DEFAULT 0,
    "failures" INTEGER NOT NULL DEFAULT 0,
    "last_error" TEXT,
    "last_sent_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "event_drains_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "drain_outbox" (
    "id" BIGSERIAL NOT NULL,
    "drain_id" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "occurred_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "project_id" TEXT NOT NULL,
    "webhook_id" TEXT,
    "data" JSONB NOT NULL,

    CONSTRAINT "drain_outbox_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "event_drains_project_id_id_idx" ON "event_drains"("project_id", "id");

-- CreateIndex
CREATE INDEX "drain_outbox_drain_id_id_idx" ON "drain_outbox"("drain_id", "id");

-- Hand-written (Prisma's schema language cannot express these).

-- Writes one drain event for every enabled drain of the project that takes `p_kind` (the outbox,
-- in the caller's transaction) and plans the drain's send job: one per drain (its job key), in
-- its own named queue (one send at a time, so batches leave in order), gathering for a second.
CREATE FUNCTION drain_emit(p_project text, p_webhook text, p_kind text, p_data jsonb) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  n integer := 0;
  d record;
BEGIN
  FOR d IN SELECT id FROM event_drains WHERE project_id = p_project AND enabled AND p_kind = ANY (events) ORDER BY id LOOP
    INSERT INTO drain_outbox (drain_id, event_id, kind, project_id, webhook_id, data)
    VALUES (d.id, 'dre_' || replace(gen_random_uuid()::text, '-', ''), p_kind, p_project, p_webhook, p_data);
    PERFORM graphile_worker.add_job('drains__send', json_build_object('drainId', d.id), queue_name := 'drain:' || d.id,
      run_at := now() + interval '1 second', job_key := 'drain:' || d.id, job_key_mode := 'preserve_run_at');
    n := n + 1;
  END LOOP;
  RETURN n;
END $$;

-- webhook.changed: a webhook's state, name or settings changed (its config_version moves with
-- every settings change). Row-level with a WHEN clause: the delivery engine's in-flight updates
-- of the same rows never reach the function.
CREATE FUNCTION drains_webhook_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM event_drains WHERE project_id = NEW.project_id AND enabled) THEN
    PERFORM drain_emit(NEW.project_id, NEW.id, 'webhook.changed',
      jsonb_build_object('webhookId', NEW.id, 'name', NEW.name, 'status', NEW.status, 'previousStatus', OLD.status, 'configVersion', NEW.config_version));
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER drains_webhook_changed AFTER UPDATE ON webhooks FOR EACH ROW
  WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.config_version IS DISTINCT FROM NEW.config_version OR OLD.name IS DISTINCT FROM NEW.name)
  EXECUTE FUNCTION drains_webhook_changed();

-- A deleted project's drains and their outbox go with it.
CREATE FUNCTION drains_project_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM drain_outbox WHERE drain_id IN (SELECT id FROM event_drains WHERE project_id = OLD.id);
  DELETE FROM event_drains WHERE project_id = OLD.id;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER drains_project_deleted AFTER DELETE ON projects DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION drains_project_deleted();
