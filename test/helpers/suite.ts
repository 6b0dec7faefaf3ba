// Shared setup of end-to-end test files: one spawned server per file and an SDK client on it.
import { afterAll, beforeAll } from "vitest";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer, type StartOptions, type TestServer } from "./server.ts";

export interface ServerFixture {
  server: TestServer;
  client: Client;
}

/** Starts a server before the file's tests and stops it (and removes its data) after them. */
export function useServer(opts: StartOptions = {}): ServerFixture {
  const fx = {} as ServerFixture;
  beforeAll(async () => {
    fx.server = await startTestServer(opts);
    fx.client = new Client({ apiUrl: fx.server.url, apiKey: null });
  });
  afterAll(async () => {
    await fx.server?.stop();
    fx.server?.cleanup();
  });
  return fx;
}

export const human = (content: string) => ({ messages: [{ role: "human", content }] });

/** A plain fetch whose body is parsed as JSON when it is JSON (for asserting status, body and headers). */
export async function rawRequest(baseUrl: string, path: string, init?: RequestInit): Promise<{ status: number; body: unknown; headers: Headers }> {
  const res = await fetch(baseUrl + path, init);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not json */
  }
  return { status: res.status, body, headers: res.headers };
}
