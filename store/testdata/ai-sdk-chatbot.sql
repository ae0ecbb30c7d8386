-- The Vercel AI chatbot template's message table, a row per message, with the statements
-- of its migration vercel/ai-chatbot lib/db/migrations/0005_wooden_whistler.sql (drizzle,
-- from lib/db/schema.ts), as research/storage-formats.md records them. The template reads
-- a chat with getMessagesByChatId:
--   SELECT * FROM "Message_v2" WHERE "chatId" = $1 ORDER BY "createdAt" ASC
-- and makes each row the UIMessage {id, role, parts}.
--
-- "Chat" comes from the template's earlier migrations; this stand-in has only the key
-- the foreign keys need.
CREATE TABLE IF NOT EXISTS "Chat" ("id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL);

-- lib/db/migrations/0005_wooden_whistler.sql:
CREATE TABLE IF NOT EXISTS "Message_v2" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"chatId" uuid NOT NULL,
	"role" varchar NOT NULL,
	"parts" json NOT NULL,
	"attachments" json NOT NULL,
	"createdAt" timestamp NOT NULL
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "Vote_v2" (
	"chatId" uuid NOT NULL,
	"messageId" uuid NOT NULL,
	"isUpvoted" boolean NOT NULL,
	CONSTRAINT "Vote_v2_chatId_messageId_pk" PRIMARY KEY("chatId","messageId")
);
--> statement-breakpoint
DO $$ BEGIN
 ALTER TABLE "Message_v2" ADD CONSTRAINT "Message_v2_chatId_Chat_id_fk" FOREIGN KEY ("chatId") REFERENCES "public"."Chat"("id") ON DELETE no action ON UPDATE no action;
EXCEPTION
 WHEN duplicate_object THEN null;
END $$;
--> statement-breakpoint
DO $$ BEGIN
 ALTER TABLE "Vote_v2" ADD CONSTRAINT "Vote_v2_chatId_Chat_id_fk" FOREIGN KEY ("chatId") REFERENCES "public"."Chat"("id") ON DELETE no action ON UPDATE no action;
EXCEPTION
 WHEN duplicate_object THEN null;
END $$;
--> statement-breakpoint
DO $$ BEGIN
 ALTER TABLE "Vote_v2" ADD CONSTRAINT "Vote_v2_messageId_Message_v2_id_fk" FOREIGN KEY ("messageId") REFERENCES "public"."Message_v2"("id") ON DELETE no action ON UPDATE no action;
EXCEPTION
 WHEN duplicate_object THEN null;
END $$;
