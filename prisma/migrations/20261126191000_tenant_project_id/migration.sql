-- Every table holding a project's data carries project_id, the distribution column of a future
-- Citus cluster (issue 31; test/structure.tenant-tables.test.ts). These three took it from a parent
-- row: added empty, filled from that parent, then required. Small tables (a few rows per webhook
-- or signed-in user).

-- AlterTable
ALTER TABLE "webhook_secrets" ADD COLUMN     "project_id" TEXT;
UPDATE "webhook_secrets" s SET "project_id" = w."project_id" FROM "webhooks" w WHERE w."id" = s."webhook_id";
ALTER TABLE "webhook_secrets" ALTER COLUMN "project_id" SET NOT NULL;

-- AlterTable
ALTER TABLE "retention_cursors" ADD COLUMN     "project_id" TEXT;
UPDATE "retention_cursors" c SET "project_id" = w."project_id" FROM "webhooks" w WHERE w."id" = c."webhook_id";
ALTER TABLE "retention_cursors" ALTER COLUMN "project_id" SET NOT NULL;

-- AlterTable
ALTER TABLE "dashboard_sessions" ADD COLUMN     "project_id" TEXT;
UPDATE "dashboard_sessions" s SET "project_id" = u."project_id" FROM "dashboard_users" u WHERE u."id" = s."user_id";
ALTER TABLE "dashboard_sessions" ALTER COLUMN "project_id" SET NOT NULL;
