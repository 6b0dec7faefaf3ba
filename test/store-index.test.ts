// Semantic search of the store (config `store.index` with a module embed function,
// test/fixtures/store-index/embed.ts) through the SDK against a spawned server.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "./helpers/server.ts";
import { rawRequest, useServer } from "./helpers/suite.ts";
import { cosine, textsOf } from "../src/storage/store-index.ts";

const fx = useServer({ config: join(REPO, "test/fixtures/store-index/service.json") });

describe("store semantic index", () => {
  it("ranks search results by similarity to the query, with scores; unindexed items come last", async () => {
    const ns = ["docs"];
    await fx.client.store.putItem(ns, "pie", { text: "apple pie recipe" });
    await fx.client.store.putItem(ns, "engine", { text: "car engine repair" });
    await fx.client.store.putItem(ns, "juice", { text: "fresh apple juice" });
    await fx.client.store.putItem(ns, "secret", { text: "apple apple apple" }, { index: false });
    await fx.client.store.putItem(ns, "notext", { other: "no indexed field" });

    const { items } = await fx.client.store.searchItems(ns, { query: "apple", limit: 10 });
    expect(
      items
        .slice(0, 3)
        .map((i) => i.key)
        .sort(),
    ).toEqual(["engine", "juice", "pie"]); // the scored ones first
    const ranked = items.slice(0, 3);
    const score = Object.fromEntries(items.map((i) => [i.key, i.score]));
    expect(score.juice).toBeGreaterThan(score.engine as number);
    expect(score.pie).toBeGreaterThan(score.engine as number);
    expect(score.secret).toBeUndefined(); // put with index: false
    expect(score.notext).toBeUndefined();
    expect(
      items
        .slice(-2)
        .map((i) => i.key)
        .sort(),
    ).toEqual(["notext", "secret"]);
    // scores are descending, offset/limit apply after ranking
    const scores = ranked.map((i) => i.score as number);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    const second = await fx.client.store.searchItems(ns, { query: "apple", limit: 1, offset: 1 });
    expect(second.items.map((i) => i.key)).toEqual([items[1].key]);
    // without a query: key order, no scores
    const plain = await fx.client.store.searchItems(ns, { limit: 10 });
    expect(plain.items.map((i) => i.key)).toEqual(["engine", "juice", "notext", "pie", "secret"]);
    expect(plain.items.every((i) => i.score === undefined)).toBe(true);
    // a put's own index fields
    await fx.client.store.putItem(ns, "titled", { title: "apple", text: "zzz" }, { index: ["title"] });
    const titled = (await fx.client.store.searchItems(ns, { query: "apple", limit: 1 })).items[0];
    expect(titled.key).toBe("titled");
    expect(titled.score).toBeCloseTo(1);

    const bad = await rawRequest(fx.server.url, "/store/items", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ namespace: ns, key: "x", value: {}, index: true }),
    });
    expect(bad.status).toBe(422);
  });

  it("embeds the texts of the configured fields and scores by cosine similarity", () => {
    expect(textsOf({ text: "a", meta: { n: 1 }, list: [1] }, ["text", "meta", "meta.n", "missing", "$"])).toEqual([
      "a",
      '{"n":1}',
      "1",
      '{"text":"a","meta":{"n":1},"list":[1]}',
    ]);
    expect(cosine([1, 0], [1, 0])).toBeCloseTo(1);
    expect(cosine([1, 0], [0, 1])).toBe(0);
    expect(cosine([0, 0], [1, 1])).toBe(0);
  });
});
