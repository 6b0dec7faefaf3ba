// Rate-limit decisions per rule, counted on the HTTP thread for /metrics: requests a rule let
// through (it was the one reported in X-RateLimit-*) and requests it refused.
export interface RuleDecisions {
  allowed: number;
  limited: number;
}

export class RateLimitDecisions {
  private readonly byRule = new Map<string, RuleDecisions>();

  count(ruleId: string, allowed: boolean): void {
    let d = this.byRule.get(ruleId);
    if (d === undefined) this.byRule.set(ruleId, (d = { allowed: 0, limited: 0 }));
    if (allowed) d.allowed++;
    else d.limited++;
  }

  entries(): [string, RuleDecisions][] {
    return [...this.byRule];
  }
}
