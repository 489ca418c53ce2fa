-- AlterTable
ALTER TABLE "deliveries" ADD COLUMN     "slot_lease" TEXT;

-- CreateTable
CREATE TABLE "webhook_slot_leases" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "slots" INTEGER NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_slot_leases_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "webhook_slot_leases_webhook_id_expires_at_idx" ON "webhook_slot_leases"("webhook_id", "expires_at");

-- AddForeignKey
ALTER TABLE "webhook_slot_leases" ADD CONSTRAINT "webhook_slot_leases_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE ON UPDATE CASCADE;
