-- The table LangChain JS's PostgresChatMessageHistory creates and writes, one row per
-- message: @langchain/community 1.1.29, dist/stores/message/postgres.js (ensureTable),
-- as recorded in research/storage-formats.md. It reads a session with
--   SELECT message FROM langchain_chat_histories WHERE session_id = $1 ORDER BY id
-- and writes each message as {type, ...data} (mapChatMessagesToStoredMessages).
CREATE TABLE IF NOT EXISTS langchain_chat_histories (
  id SERIAL PRIMARY KEY, session_id VARCHAR(255) NOT NULL, message JSONB NOT NULL);
