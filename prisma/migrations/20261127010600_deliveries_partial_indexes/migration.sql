-- Deliveries: the replay and idempotency-key indexes hold only the rows that have one (most have
-- neither): every delivery written (ingest) and every claim and result (non-HOT updates, as status is
-- indexed) adds two index entries fewer.
-- DropIndex
DROP INDEX "deliveries_replay_of_id_id_idx";

-- DropIndex
DROP INDEX "deliveries_project_id_idempotency_key_idx";

-- CreateIndex
CREATE INDEX "deliveries_replay_of_id_id_idx" ON "deliveries"("replay_of_id", "id") WHERE (replay_of_id IS NOT NULL);

-- CreateIndex
CREATE INDEX "deliveries_project_id_idempotency_key_idx" ON "deliveries"("project_id", "idempotency_key") WHERE (idempotency_key IS NOT NULL);
