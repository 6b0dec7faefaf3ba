// Semantic search for the store (config `store.index: {dims, embed, fields}`): items' texts (the
// configured fields, or the put's own `index` list; "$" is the whole value) are embedded on write
// and kept in `store_vectors`; a search with `query` ranks the matching items by cosine similarity
// (an item's best field) and returns `score`. Embeddings come from the user's module
// (`"./embed.ts:fn"`): a function `(texts) => vectors` or an Embeddings object
// (embedDocuments/embedQuery).
import type { PutOperation } from "@langchain/langgraph-checkpoint";
import { importUserModule } from "../loader/user-modules.ts";

export interface StoreIndexOptions {
  dims: number;
  fields: readonly string[];
  embed: { filePath: string; exportName: string };
}

export interface Embedder {
  documents(texts: string[]): Promise<number[][]>;
  query(text: string): Promise<number[]>;
}

export async function loadEmbedder(ref: StoreIndexOptions["embed"]): Promise<Embedder> {
  const mod = await importUserModule(ref.filePath);
  const e = mod[ref.exportName] as
    | ((texts: string[]) => Promise<number[][]> | number[][])
    | { embedDocuments?: (texts: string[]) => Promise<number[][]>; embedQuery?: (text: string) => Promise<number[]> }
    | undefined;
  if (typeof e === "function") return { documents: async (t) => e(t), query: async (q) => (await e([q]))[0] };
  if (e && typeof e.embedDocuments === "function" && typeof e.embedQuery === "function") {
    const { embedDocuments, embedQuery } = e as Required<Pick<NonNullable<typeof e>, "embedDocuments" | "embedQuery">>;
    return { documents: (t) => embedDocuments.call(e, t), query: (q) => embedQuery.call(e, q) };
  }
  throw new Error(`store.index.embed: export "${ref.exportName}" of ${ref.filePath} is neither a function (texts) => vectors nor an Embeddings object`);
}

/** The texts of `value` to embed: "$" is the whole value; other fields are dot paths into it (missing ones skipped). */
export function textsOf(value: Record<string, unknown>, fields: readonly string[]): string[] {
  const out: string[] = [];
  for (const field of fields) {
    let v: unknown = value;
    if (field !== "$") {
      for (const step of field.split(".")) v = typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>)[step] : undefined;
    }
    if (v === undefined || v === null) continue;
    out.push(typeof v === "string" ? v : JSON.stringify(v));
  }
  return out;
}

export function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}

/** Lazy, shared loading of the embedder (first store write or query), and the dims check. */
export class StoreIndex {
  private embedder: Promise<Embedder> | undefined;

  constructor(readonly opts: StoreIndexOptions) {}

  private load(): Promise<Embedder> {
    this.embedder ??= loadEmbedder(this.opts.embed).catch((err: unknown) => {
      this.embedder = undefined;
      throw err;
    });
    return this.embedder;
  }

  async embedDocuments(texts: string[]): Promise<number[][]> {
    if (texts.length === 0) return [];
    return this.checked(await (await this.load()).documents(texts));
  }

  /** The embeddings of each put that is indexed (value set, the put's `index` not false), by put. */
  async embedPuts(ops: readonly PutOperation[]): Promise<Map<PutOperation, number[][]>> {
    const out = new Map<PutOperation, number[][]>();
    const jobs = ops
      .filter((op) => op.value !== null && op.index !== false)
      .map((op) => ({ op, texts: textsOf(op.value as Record<string, unknown>, Array.isArray(op.index) ? op.index : this.opts.fields) }))
      .filter((j) => j.texts.length > 0);
    const flat = await this.embedDocuments(jobs.flatMap((j) => j.texts));
    let at = 0;
    for (const j of jobs) {
      out.set(j.op, flat.slice(at, at + j.texts.length));
      at += j.texts.length;
    }
    return out;
  }

  async embedQuery(text: string): Promise<number[]> {
    return this.checked([await (await this.load()).query(text)])[0];
  }

  private checked(vectors: number[][]): number[][] {
    for (const v of vectors) {
      if (!Array.isArray(v) || v.length !== this.opts.dims)
        throw new Error(
          `store.index: the embedding function returned a vector of ${Array.isArray(v) ? v.length : typeof v} dimensions; store.index.dims is ${this.opts.dims}`,
        );
    }
    return vectors.map((v) => Array.from(v, Number));
  }
}
