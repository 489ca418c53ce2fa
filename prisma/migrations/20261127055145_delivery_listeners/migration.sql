-- deliveryUpdated listeners (src/deliveries/listeners.ts): claims and results notify only the projects someone
-- subscribes to, so a pipeline nobody watches sends no notification per delivery.
-- CreateTable
CREATE TABLE "delivery_listeners" (
    "project_id" TEXT NOT NULL,
    "process_id" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "delivery_listeners_pkey" PRIMARY KEY ("project_id","process_id")
);
