-- Mastra's message table as @mastra/pg creates it (PostgresStore init: createTable, whose
-- DDL generateTableSQL in mastra-ai/mastra stores/pg/src/storage/db/index.ts writes from
-- @mastra/core's TABLE_SCHEMAS.mastra_messages, a "<name>Z" TIMESTAMPTZ column added for
-- each timestamp), and the index it creates beside it, as research/storage-formats.md
-- records them (@mastra/pg 1.27). content is the message's content object as JSON text;
-- Mastra reads a thread ORDER BY "createdAt" and makes each row
-- {id, role, content: JSON.parse(content), type, createdAt, threadId, resourceId}.
CREATE TABLE IF NOT EXISTS "public"."mastra_messages" (
              "id" TEXT PRIMARY KEY NOT NULL,
"thread_id" TEXT NOT NULL,
"content" TEXT NOT NULL,
"role" TEXT NOT NULL,
"type" TEXT NOT NULL,
"createdAt" TIMESTAMP NOT NULL,
"resourceId" TEXT ,
"createdAtZ" TIMESTAMPTZ DEFAULT NOW()
            );
CREATE INDEX IF NOT EXISTS "mastra_messages_thread_id_createdat_idx" ON "public"."mastra_messages" ("thread_id", "createdAt" DESC);
