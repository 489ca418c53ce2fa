-- AlterTable
ALTER TABLE "webhook_slot_leases" ADD COLUMN     "holder" TEXT;
