// What kind of address an IP literal is (loopback, private, link-local, unspecified, public), and
// the host names that are loopback without asking DNS. Used by the webhook address rule
// (webhooks/address-check.ts) and to tell a database on this machine (server/actor-workers.ts).
import { isIP } from "node:net";

/** What kind of address an IP is, for the webhook rule (public = anything not listed). */
export type AddressKind = "loopback" | "private" | "link-local" | "unspecified" | "public";

/** Names that are loopback without asking DNS (localhost, *.localhost, Docker's host alias). */
const LOOPBACK_NAMES: ReadonlySet<string> = new Set(["localhost", "host.docker.internal"]);

/** whether a host name (lower case, no trailing dot) is loopback without asking DNS */
export const isLoopbackName = (host: string): boolean => LOOPBACK_NAMES.has(host) || host.endsWith(".localhost");

function ipv4Kind(b: readonly number[]): AddressKind {
  const [a, c] = b;
  if (a === 0) return "unspecified"; // 0.0.0.0/8, "this network"
  if (a === 127) return "loopback";
  if (a === 10 || (a === 172 && c >= 16 && c <= 31) || (a === 192 && c === 168)) return "private"; // RFC 1918
  if (a === 100 && c >= 64 && c <= 127) return "private"; // RFC 6598 shared address space (carrier NAT, cloud internals)
  if (a === 169 && c === 254) return "link-local"; // also cloud metadata services (169.254.169.254)
  return "public";
}

function parseIpv4(s: string): number[] | undefined {
  const parts = s.split(".");
  if (parts.length !== 4) return undefined;
  const bytes = parts.map(Number);
  return bytes.every((n, i) => /^\d{1,3}$/.test(parts[i]) && n <= 255) ? bytes : undefined;
}

/** The 16 bytes of an IPv6 address (`::` and a trailing dotted quad expanded); undefined if malformed. */
function parseIpv6(s: string): number[] | undefined {
  let text = s.split("%")[0]; // zone id
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(":");
  if (text.includes(".", lastColon)) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (!v4) return undefined;
    tail = v4;
    text = `${text.slice(0, lastColon + 1)}0:0`; // two placeholder groups, replaced below
  }
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string) => (h === "" ? [] : h.split(":"));
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...rest];
  const bytes: number[] = [];
  for (const g of all) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return undefined;
    const n = parseInt(g, 16);
    bytes.push(n >> 8, n & 0xff);
  }
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

function ipv6Kind(b: readonly number[]): AddressKind {
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10)) {
    if (b[10] === 0xff && b[11] === 0xff) return ipv4Kind(b.slice(12)); // IPv4-mapped ::ffff:a.b.c.d
    if (b[10] === 0 && b[11] === 0) {
      if (zeros(12, 15) && b[15] === 0) return "unspecified"; // ::
      if (zeros(12, 15) && b[15] === 1) return "loopback"; // ::1
      return ipv4Kind(b.slice(12)); // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks)
    }
  }
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return ipv4Kind(b.slice(12)); // NAT64 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return ipv4Kind(b.slice(2, 6)); // 6to4 2002:a.b.c.d::/48
  if ((b[0] & 0xfe) === 0xfc) return "private"; // ULA fc00::/7
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) return "link-local"; // fe80::/10
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0xc0) return "private"; // site-local fec0::/10 (deprecated)
  return "public";
}

/** The kind of an IP literal (IPv6 with or without brackets); undefined for anything that is not one. */
export function addressKind(ip: string): AddressKind | undefined {
  const bare = ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip;
  const family = isIP(bare.split("%")[0]);
  if (family === 4) return ipv4Kind(parseIpv4(bare)!);
  if (family === 6) {
    const bytes = parseIpv6(bare);
    return bytes ? ipv6Kind(bytes) : undefined;
  }
  return undefined;
}
