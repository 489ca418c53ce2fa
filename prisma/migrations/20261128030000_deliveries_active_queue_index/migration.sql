-- Deliveries: the (webhook_id, status, seq) index holds only the active deliveries (queued,
-- scheduled, delivering, retrying), the queue every claim, FIFO head and backlog count reads with
-- those statuses as literals. A result that ends a delivery (a non-HOT update, as status is
-- indexed) adds no entry to it, and the index stays the size of the backlog rather than growing
-- with every delivery kept.
-- DropIndex
DROP INDEX "deliveries_webhook_id_status_seq_idx";

-- CreateIndex
CREATE INDEX "deliveries_webhook_id_status_seq_idx" ON "deliveries"("webhook_id", "status", "seq") WHERE (status IN ('queued', 'scheduled', 'delivering', 'retrying'));
