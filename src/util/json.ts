// JSON values as TypeScript types: what a request body, a record's metadata or a stored value holds.
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A LangChain RunnableConfig as JSON (what assistants and runs store and requests send). */
export interface RunnableConfigJson {
  tags?: string[];
  recursion_limit?: number;
  configurable?: JsonObject;
  [key: string]: Json | undefined;
}
