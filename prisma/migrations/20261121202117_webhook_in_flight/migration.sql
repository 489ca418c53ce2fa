-- AlterTable
ALTER TABLE "webhooks" ADD COLUMN     "in_flight" INTEGER NOT NULL DEFAULT 0;
