// The client address a request is rate-limited under: behind a trusted proxy (CIDRs) its
// X-Forwarded-For names the client; from anyone else the header is the client's own claim and is
// ignored, or rotating it would mint fresh buckets.
import { BlockList, isIP } from "node:net";

export class TrustedProxies {
  private readonly list = new BlockList();

  /** `cidrs`: "10.0.0.0/8", "192.0.2.7" (a single address), "fd00::/8"; throws on a malformed entry. */
  constructor(readonly cidrs: readonly string[]) {
    for (const entry of cidrs) {
      const [address, bits, extra] = entry.trim().split("/");
      const family = isIP(address);
      const max = family === 4 ? 32 : 128;
      const prefix = bits === undefined ? max : Number(bits);
      if (family === 0 || extra !== undefined || !/^\d+$/.test(bits ?? String(max)) || prefix > max) {
        throw new Error(`not an IP address or CIDR: "${entry}"`);
      }
      this.list.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6");
    }
  }

  /** A comma-separated list, as given to --trusted-proxies / TROUPE_TRUSTED_PROXIES. */
  static parse(list: string): TrustedProxies {
    return new TrustedProxies(
      list
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== ""),
    );
  }

  trusts(ip: string): boolean {
    const family = isIP(ip);
    return family !== 0 && this.list.check(ip, family === 4 ? "ipv4" : "ipv6");
  }

  /**
   * The peer, unless it is a trusted proxy: then the right-most X-Forwarded-For entry that is not
   * itself a trusted proxy (each proxy appends the address it saw; entries further left are
   * whatever the client sent). All trusted: the left-most.
   */
  clientIp(peer: string, forwardedFor: string | undefined): string {
    if (!forwardedFor || !this.trusts(peer)) return peer;
    const hops = forwardedFor.split(",");
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i].trim();
      if (hop === "") continue;
      if (!this.trusts(hop)) return hop;
      if (i === 0) return hop;
    }
    return peer;
  }
}
