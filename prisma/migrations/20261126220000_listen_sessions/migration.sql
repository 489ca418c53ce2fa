-- CreateTable
CREATE TABLE "listen_sessions" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "destination_id" TEXT NOT NULL,
    "hub" TEXT NOT NULL,
    "connected_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "seen_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "listen_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "listen_handoffs" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "request" BYTEA NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "listen_handoffs_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "listen_sessions_destination_id_seen_at_idx" ON "listen_sessions"("destination_id", "seen_at");

-- CreateIndex
CREATE INDEX "listen_handoffs_created_at_idx" ON "listen_handoffs"("created_at");

-- AddForeignKey
ALTER TABLE "listen_sessions" ADD CONSTRAINT "listen_sessions_destination_id_fkey" FOREIGN KEY ("destination_id") REFERENCES "destinations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
