// OAuth token records: the stored shape (owner, sealed secrets) and the public OAuthTokenSummary
// the API returns, which carries no secret by construction (fields are copied, never spread).
import type { SealedSecret } from "./cipher.ts";

export type TokenRecord = OAuthTokenSummary & {
  org_id: string;
  /** the user who owns it: only they can see or change it */
  owner_user_id: string;
  /** access and refresh token, AES-256-GCM sealed (see cipher.ts) */
  secret: SealedSecret;
};

export interface OAuthTokenSummary {
  id: string;
  provider_id: string;
  provider_account_label: string | null;
  scopes: string[];
  expires_at: string | null;
  is_default: boolean;
  created_at: string;
  updated_at: string;
}

export interface TokenSecrets {
  access_token: string;
  refresh_token: string | null;
}

export interface TokenCreate {
  provider_id: string;
  access_token: string;
  refresh_token?: string | null;
  expires_at?: string | null;
  expires_in_seconds?: number | null;
  scopes?: string[];
  provider_account_label?: string | null;
  is_default?: boolean;
}

/** OAuthTokenUpdateRequest: an absent field (or `is_default: null`) leaves the value unchanged. */
export interface TokenMetadataUpdate {
  provider_account_label?: string | null;
  is_default?: boolean | null;
}

export function toSummary(r: TokenRecord): OAuthTokenSummary {
  return {
    id: r.id,
    provider_id: r.provider_id,
    provider_account_label: r.provider_account_label,
    scopes: r.scopes,
    expires_at: r.expires_at,
    is_default: r.is_default,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}
