// Which addresses a webhook may reach. guardedLookup resolves a name once and refuses it if any
// address is internal; the socket connects to the checked address, so DNS rebinding has nothing to
// swap. IP literals never reach a lookup: refusedHost() checks them before the request.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { LookupFunction } from "node:net";
import { addressKind, isLoopbackName, type AddressKind } from "../util/address-kind.ts";

/** The part of the URL policy this check applies. */
export interface AddressRule {
  /** loopback, private (RFC 1918, 100.64/10, ULA), link-local and unspecified addresses allowed */
  allowPrivateAddresses: boolean;
  /** loopback refused even when private addresses are allowed */
  disableLoopback: boolean;
}

/** 0.0.0.0 and :: reach the local host when connected to, so disable_loopback covers them too. */
const reachesLocalHost = (kind: AddressKind): boolean => kind === "loopback" || kind === "unspecified";

const refusesKind = (kind: AddressKind, rule: AddressRule): boolean =>
  kind !== "public" && (!rule.allowPrivateAddresses || (reachesLocalHost(kind) && rule.disableLoopback));

const why = (rule: AddressRule, kind: AddressKind): string =>
  rule.allowPrivateAddresses && reachesLocalHost(kind) ? "webhooks.url.disable_loopback" : "webhooks.url.allow_private_addresses";

/**
 * Reason a URL host (as WHATWG URL spells it: lower case, IPv4 normalised, IPv6 in brackets) is
 * refused without resolving it — an IP literal of a refused kind, or a loopback name — else null.
 */
export function refusedHost(hostname: string, rule: AddressRule): string | null {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  const kind = addressKind(host) ?? (isLoopbackName(host) ? "loopback" : undefined);
  if (kind === undefined || !refusesKind(kind, rule)) return null;
  return `Webhook host ${hostname} is a ${kind} address, refused by the URL policy (${why(rule, kind)})`;
}

/** Error a guarded lookup fails with: the sender does not retry it. */
export const REFUSED_ADDRESS = "ERR_WEBHOOK_ADDRESS_REFUSED";

/**
 * A `lookup` for http.request that resolves like dns.lookup and fails with REFUSED_ADDRESS when
 * any address of the name is one the rule refuses.
 */
export function guardedLookup(rule: AddressRule): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, "", 0);
      for (const a of addresses) {
        const kind = addressKind(a.address);
        if (kind !== undefined && refusesKind(kind, rule)) {
          const refused: NodeJS.ErrnoException = new Error(
            `Webhook host ${hostname} resolves to ${a.address}, a ${kind} address, refused by the URL policy (${why(rule, kind)})`,
          );
          refused.code = REFUSED_ADDRESS;
          return callback(refused, "", 0);
        }
      }
      if (options.all) return callback(null, addresses);
      const first = addresses[0];
      if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "", 0);
      callback(null, first.address, first.family);
    });
  };
}
