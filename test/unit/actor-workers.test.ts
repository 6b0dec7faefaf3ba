// actorWorkerCount (src/server/actor-workers.ts): one actor worker per CPU, one less when the
// PostgreSQL server shares the machine; --workers always wins. actorWorkerYoungGenerationMb: a
// larger young generation with a database (its runs live longer).
import { describe, expect, it } from "vitest";
import { actorWorkerCount, actorWorkerYoungGenerationMb, databaseIsLocal } from "../../src/server/actor-workers.ts";

describe("actor workers by default", () => {
  it("one per CPU without a database or with a remote one; --workers as given", () => {
    expect(actorWorkerCount(undefined, undefined, 4)).toBe(4);
    expect(actorWorkerCount(undefined, "postgres://u:p@db.internal:5432/troupe", 4)).toBe(4);
    expect(actorWorkerCount(undefined, "postgres://u@10.0.0.7/troupe", 2)).toBe(2);
    expect(actorWorkerCount(3, "postgres://u@127.0.0.1:5432/troupe", 2)).toBe(3);
  });

  it("one CPU left to a PostgreSQL on this machine, never fewer than one worker", () => {
    expect(actorWorkerCount(undefined, "postgres://troupe@127.0.0.1:55432/postgres", 2)).toBe(1);
    expect(actorWorkerCount(undefined, "postgresql://u@localhost/db", 8)).toBe(7);
    expect(actorWorkerCount(undefined, "postgres://u@127.0.0.1/db", 1)).toBe(1);
  });

  it("knows loopback hosts and Unix sockets as local", () => {
    for (const uri of [
      "postgres://u@localhost/db",
      "postgres://u@LOCALHOST:5432/db",
      "postgres://u@127.0.0.1/db",
      "postgres://u@127.8.9.10/db",
      "postgres://u@[::1]:5432/db",
      "postgres://u@[::ffff:127.0.0.1]/db",
      "postgres:///db",
      "postgres:///db?host=/var/run/postgresql",
      "postgres://u@%2Fvar%2Frun%2Fpostgresql/db",
    ])
      expect(databaseIsLocal(uri), uri).toBe(true);
    for (const uri of [
      "postgres://u@db/db",
      "postgres://u@128.0.0.1/db",
      "postgres://u@localhost.example.com/db",
      "postgres://u@[2001:db8::1]/db",
      "not a uri",
    ])
      expect(databaseIsLocal(uri), uri).toBe(false);
  });
});

describe("actor workers' young generation", () => {
  it("24 MB on LMDB, 96 MB with a database, local or not", () => {
    expect(actorWorkerYoungGenerationMb(undefined)).toBe(24);
    expect(actorWorkerYoungGenerationMb("postgres://troupe@127.0.0.1:55432/postgres")).toBe(96);
    expect(actorWorkerYoungGenerationMb("postgres://u:p@db.internal:5432/troupe")).toBe(96);
  });
});
