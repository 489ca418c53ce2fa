-- AddForeignKey
ALTER TABLE "retention_cursors" ADD CONSTRAINT "retention_cursors_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;
