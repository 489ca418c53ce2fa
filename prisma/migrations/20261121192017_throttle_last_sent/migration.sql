-- AlterTable
ALTER TABLE "webhooks" ADD COLUMN     "throttle_last_sent_at" TIMESTAMP(3);
