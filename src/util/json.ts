// JSON values as TypeScript types: what a request body, a record's metadata or a stored value holds.
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };
