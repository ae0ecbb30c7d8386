-- LangGraph JS PostgresSaver.setup(), @langchain/langgraph-checkpoint-postgres 1.0.5
-- (langchain-ai/langgraphjs libs/checkpoint-postgres/src/migrations.ts at f8bdf16d4fe2),
-- schema "public" as its default: CREATE SCHEMA, then migrations 0 to 4, each recorded.
CREATE SCHEMA IF NOT EXISTS "public";
CREATE TABLE IF NOT EXISTS "public".checkpoint_migrations (
    v INTEGER PRIMARY KEY
  );
INSERT INTO "public".checkpoint_migrations (v) VALUES (0);
CREATE TABLE IF NOT EXISTS "public".checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint JSONB NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{}',
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
  );
INSERT INTO "public".checkpoint_migrations (v) VALUES (1);
CREATE TABLE IF NOT EXISTS "public".checkpoint_blobs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    channel TEXT NOT NULL,
    version TEXT NOT NULL,
    type TEXT NOT NULL,
    blob BYTEA,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)
  );
INSERT INTO "public".checkpoint_migrations (v) VALUES (2);
CREATE TABLE IF NOT EXISTS "public".checkpoint_writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    blob BYTEA NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
  );
INSERT INTO "public".checkpoint_migrations (v) VALUES (3);
ALTER TABLE "public".checkpoint_blobs ALTER COLUMN blob DROP not null;
INSERT INTO "public".checkpoint_migrations (v) VALUES (4);
