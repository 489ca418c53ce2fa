-- CreateTable
CREATE TABLE "files" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "webhook_id" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "field" TEXT,
    "filename" TEXT NOT NULL,
    "content_type" TEXT NOT NULL,
    "size" BIGINT NOT NULL,
    "sha256" TEXT NOT NULL,
    "storage_key" TEXT NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'stored',
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMP(3),
    "purged_at" TIMESTAMP(3),

    CONSTRAINT "files_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "files_project_id_id_idx" ON "files"("project_id", "id");

-- CreateIndex
CREATE INDEX "files_event_id_idx" ON "files"("event_id");

-- CreateIndex
CREATE INDEX "files_webhook_id_id_idx" ON "files"("webhook_id", "id");

-- CreateIndex
CREATE INDEX "files_expires_at_idx" ON "files"("expires_at");
