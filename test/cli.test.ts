// The `troupe` command line as a user meets it: help for every command, and one-line errors with
// exit code 2 for bad flags (no stack traces).
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO } from "./helpers/server.ts";

const troupe = (args: string[], cwd = REPO) => spawnSync(process.execPath, [join(REPO, "bin/troupe.js"), ...args], { cwd, encoding: "utf8", timeout: 60_000 });

describe("troupe CLI", () => {
  it("prints help for every command", () => {
    for (const args of [["--help"], ["dev", "--help"], ["serve", "-h"], ["control-plane", "--help"]]) {
      const r = troupe(args);
      expect(r.status, args.join(" ")).toBe(0);
      expect(r.stdout).toContain("Usage:");
    }
    const keys = troupe(["keys", "create", "--help"]);
    expect(keys.status).toBe(0);
    expect(keys.stdout).toContain("troupe keys create");
  });

  it("reports a bad flag in one line with exit code 2", () => {
    for (const args of [
      ["dev", "--port", "abc"],
      ["serve", "--workers", "0"],
      ["dev", "--bogus"],
      ["serve", "--rate-limit", "xx"],
      ["serve", "--node-id", "no spaces"],
      ["serve", "--node-id", "-dash-first"],
      ["control-plane", "--region", "xx"],
    ]) {
      const r = troupe(args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr.split("\n")[0]).toMatch(/^troupe: /);
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
  });

  it("refuses a --database-uri / DATABASE_URI that is not postgres:// (exit 2) and an unreachable database in one line (exit 1)", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "troupe-cli-"));
    const cfg = join(REPO, "test/fixtures/graphs/service.json");
    try {
      const base = ["serve", "--host", "127.0.0.1", "--port", "0", "--config", cfg, "--data-dir", dataDir];
      const scheme = troupe([...base, "--database-uri", "mysql://u:secret@h/db"]);
      expect(scheme.status).toBe(2);
      expect(scheme.stderr.split("\n")[0]).toBe('troupe: --database-uri must be a postgres:// or postgresql:// URI, got "mysql://u:***@h/db"');
      const env = spawnSync(process.execPath, [join(REPO, "bin/troupe.js"), ...base], {
        cwd: REPO,
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, DATABASE_URI: "not a uri" },
      });
      expect(env.status).toBe(2);
      expect(env.stderr).toMatch(/^troupe: DATABASE_URI must be a postgres/);
      // port 1 on loopback: nothing listens, the connection is refused at once
      const down = troupe([...base, "--database-uri", "postgres://u:secret@127.0.0.1:1/db"]);
      expect(down.status).toBe(1);
      const lines = down.stderr.split("\n").filter((l) => l.startsWith("troupe: "));
      expect(lines).toEqual(["troupe: cannot open the database postgres://u:***@127.0.0.1:1/db: connect ECONNREFUSED 127.0.0.1:1"]);
      expect(down.stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(down.stderr).not.toContain("secret");
      // the flag wins over DATABASE_URI
      const both = spawnSync(process.execPath, [join(REPO, "bin/troupe.js"), ...base, "--database-uri", "postgres://u@127.0.0.1:1/db"], {
        cwd: REPO,
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, DATABASE_URI: "mysql://x" },
      });
      expect(both.status).toBe(1);
      expect(both.stderr).toContain("troupe: cannot open the database postgres://u@127.0.0.1:1/db: connect ECONNREFUSED");
      expect(troupe(["serve", "--help"]).stdout).toContain("--database-uri URI");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("names both config files it looked for when there is none", () => {
    const empty = mkdtempSync(join(tmpdir(), "troupe-cli-"));
    try {
      const r = troupe(["dev", "--port", "0"], empty);
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(join(empty, "service.json"));
      expect(r.stderr).toContain(join(empty, "langgraph.json"));
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
