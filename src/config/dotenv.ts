// Minimal dotenv parser for the config's `env: "./.env"` form (no dependency): KEY=VALUE lines,
// `export ` prefix, `#` comments, single/double/backtick quotes (may span lines; escapes in double quotes).

export interface DotenvResult {
  readonly vars: Record<string, string>;
  /** 1-based line numbers with what is wrong there. */
  readonly errors: readonly { line: number; message: string }[];
}

const ASSIGN = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*/;
const ESCAPES: Record<string, string> = { n: "\n", r: "\r", t: "\t", "\\": "\\", '"': '"' };

export function parseDotenv(text: string): DotenvResult {
  const vars: Record<string, string> = {};
  const errors: { line: number; message: string }[] = [];
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);

  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = lines[i];
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#")) continue;
    const m = ASSIGN.exec(line);
    if (!m) {
      // the line itself is not quoted: a misnamed file (a key file, /etc/shadow) must not leak into errors
      errors.push({ line: lineNo, message: "expected KEY=VALUE" });
      continue;
    }
    const key = m[1];
    let rest = line.slice(m[0].length);
    const quote = rest[0];
    if (quote !== '"' && quote !== "'" && quote !== "`") {
      vars[key] = rest.replace(/(^|\s+)#.*$/, "").trim();
      continue;
    }
    // Quoted: gather lines until the closing quote.
    let body = rest.slice(1);
    let close = findClose(body, quote);
    while (close < 0 && i + 1 < lines.length) {
      i++;
      body += "\n" + lines[i];
      close = findClose(body, quote);
    }
    if (close < 0) {
      errors.push({ line: lineNo, message: `unterminated ${quote} quote for ${key}` });
      continue;
    }
    const after = body.slice(close + 1).trim();
    if (after !== "" && !after.startsWith("#")) {
      errors.push({ line: lineNo, message: `unexpected text after the closing quote of ${key}` });
      continue;
    }
    rest = body.slice(0, close);
    vars[key] = quote === '"' ? rest.replace(/\\([nrt\\"])/g, (_, c: string) => ESCAPES[c]) : rest;
  }
  return { vars, errors };
}

/** Index of the closing quote in `s` (backslash escapes it inside double quotes), or -1. */
function findClose(s: string, quote: string): number {
  for (let j = 0; j < s.length; j++) {
    if (quote === '"' && s[j] === "\\") j++;
    else if (s[j] === quote) return j;
  }
  return -1;
}
