-- The last tenant tables without project_id, the distribution column of a future Citus cluster
-- (issue 31; test/structure.tenant-tables.test.ts): each added empty, filled from the row it
-- belongs to, then required. Their writers set it from what their statement already has.
--
-- delivery_attempts is the largest history table: filling it writes every attempt once more
-- (one pass over the table, joined to deliveries by their primary key).

-- AlterTable
ALTER TABLE "delivery_attempts" ADD COLUMN     "project_id" TEXT;
UPDATE "delivery_attempts" a SET "project_id" = d."project_id" FROM "deliveries" d WHERE d."id" = a."delivery_id";
ALTER TABLE "delivery_attempts" ALTER COLUMN "project_id" SET NOT NULL;

-- AlterTable
ALTER TABLE "inbound_dedupe" ADD COLUMN     "project_id" TEXT;
UPDATE "inbound_dedupe" i SET "project_id" = w."project_id" FROM "webhooks" w WHERE w."id" = i."webhook_id";
ALTER TABLE "inbound_dedupe" ALTER COLUMN "project_id" SET NOT NULL;

-- AlterTable
-- Keys are 'ingest:p:<project id>' and 'ingest:w:<webhook id>' (src/projects/quotas/ingest-check.ts).
-- A window of a project or webhook that is gone counts nothing any more (each lasts one second):
-- it goes.
ALTER TABLE "rate_limit_windows" ADD COLUMN     "project_id" TEXT;
UPDATE "rate_limit_windows" r SET "project_id" = CASE
    WHEN r."key" LIKE 'ingest:p:%' THEN (SELECT p."id" FROM "projects" p WHERE p."id" = substr(r."key", 10))
    WHEN r."key" LIKE 'ingest:w:%' THEN (SELECT w."project_id" FROM "webhooks" w WHERE w."id" = substr(r."key", 10))
  END;
DELETE FROM "rate_limit_windows" WHERE "project_id" IS NULL;
ALTER TABLE "rate_limit_windows" ALTER COLUMN "project_id" SET NOT NULL;
