// Usage rows (one per student, day and source) summed the ways the Usage tab shows them: per
// student, per day (stacked by student or as a total), and budgets near their limit.
import type { Schemas } from "../api/client";

export type UsageRow = Schemas["UsageOut"];
export type RemainingRow = Schemas["RemainingOut"];

/** The key of the series that gathers the students beyond the chart's few largest. */
export const OTHERS = "__others__";

export interface StudentTotals {
  userId: string;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  tokens: number;
  costUsd: number;
}

/** Each student's totals over the rows, the largest users of tokens first. */
export function totalsByStudent(rows: readonly UsageRow[]): StudentTotals[] {
  const totals = new Map<string, StudentTotals>();
  for (const row of rows) {
    let entry = totals.get(row.user_id);
    if (!entry) {
      entry = {
        userId: row.user_id,
        requests: 0,
        inputTokens: 0,
        outputTokens: 0,
        tokens: 0,
        costUsd: 0,
      };
      totals.set(row.user_id, entry);
    }
    entry.requests += row.requests;
    entry.inputTokens += row.input_tokens;
    entry.outputTokens += row.output_tokens;
    entry.tokens += row.input_tokens + row.output_tokens;
    entry.costUsd += row.cost_usd;
  }
  return [...totals.values()].sort(
    (a, b) => b.tokens - a.tokens || b.costUsd - a.costUsd || a.userId.localeCompare(b.userId),
  );
}

/** The sum of every student's totals. */
export function grandTotal(students: readonly StudentTotals[]): Omit<StudentTotals, "userId"> {
  return students.reduce(
    (sum, s) => ({
      requests: sum.requests + s.requests,
      inputTokens: sum.inputTokens + s.inputTokens,
      outputTokens: sum.outputTokens + s.outputTokens,
      tokens: sum.tokens + s.tokens,
      costUsd: sum.costUsd + s.costUsd,
    }),
    { requests: 0, inputTokens: 0, outputTokens: 0, tokens: 0, costUsd: 0 },
  );
}

const DAY_MS = 86_400_000;
const ISO_DAY = /^\d{4}-\d{2}-\d{2}$/;

/** A date as the `YYYY-MM-DD` of its UTC day (usage days are UTC days). */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The days from `since` to `until` (`YYYY-MM-DD`, both included); at most `max` of them (the
 *  last ones), none when either is not a day or they are the wrong way round. */
export function daysBetween(since: string, until: string, max = 366): string[] {
  if (!ISO_DAY.test(since) || !ISO_DAY.test(until)) return [];
  const start = Date.parse(`${since}T00:00:00Z`);
  const end = Date.parse(`${until}T00:00:00Z`);
  if (Number.isNaN(start) || Number.isNaN(end) || end < start) return [];
  const first = Math.max(start, end - (max - 1) * DAY_MS);
  const days: string[] = [];
  for (let t = first; t <= end; t += DAY_MS) days.push(utcDay(new Date(t)));
  return days;
}

/** The default range of the Usage tab: the last `days` UTC days up to today. */
export function defaultRange(today: Date, days = 14): { since: string; until: string } {
  return {
    since: utcDay(new Date(today.getTime() - (days - 1) * DAY_MS)),
    until: utcDay(today),
  };
}

export interface DailySeries {
  /** The days on the chart's axis, oldest first. */
  days: string[];
  /** Tokens per day of each of the largest students (then `OTHERS`, when there are more). */
  series: { userId: string; tokens: number[] }[];
  /** Tokens per day of everyone together. */
  totals: number[];
  /** Cost per day of everyone together (US dollars). */
  costs: number[];
}

/** Tokens per day, per student and in total. The days are `range` when given (so quiet days
 *  show as zero), else those from the first to the last day with usage. The `maxSeries - 1`
 *  largest students get a series each and the rest share `OTHERS` (a legend of sixty names
 *  helps nobody); with at most `maxSeries` students everyone gets their own. */
export function tokensPerDay(
  rows: readonly UsageRow[],
  range?: { since: string; until: string },
  maxSeries = 8,
): DailySeries {
  let days = range ? daysBetween(range.since, range.until) : [];
  if (days.length === 0 && rows.length > 0) {
    const seen = rows.map((row) => row.day).sort();
    days = daysBetween(seen[0]!, seen[seen.length - 1]!);
  }
  const index = new Map(days.map((day, i) => [day, i]));
  const ranked = totalsByStudent(rows).map((s) => s.userId);
  const own = ranked.length <= maxSeries ? ranked : ranked.slice(0, Math.max(0, maxSeries - 1));
  const keyOf = new Map<string, string>(ranked.map((id) => [id, OTHERS]));
  for (const id of own) keyOf.set(id, id);
  const keys = ranked.length > own.length ? [...own, OTHERS] : own;
  const byKey = new Map(keys.map((key) => [key, new Array<number>(days.length).fill(0)]));
  const totals = new Array<number>(days.length).fill(0);
  const costs = new Array<number>(days.length).fill(0);
  for (const row of rows) {
    const i = index.get(row.day);
    if (i === undefined) continue;
    const tokens = row.input_tokens + row.output_tokens;
    byKey.get(keyOf.get(row.user_id) ?? OTHERS)![i]! += tokens;
    totals[i]! += tokens;
    costs[i]! += row.cost_usd;
  }
  return {
    days,
    series: keys.map((userId) => ({ userId, tokens: byKey.get(userId)! })),
    totals,
    costs,
  };
}

export interface NearBudget {
  /** The student; `null` for the course's total budget (shared by everyone). */
  userId: string | null;
  budgetId: string;
  scope: string;
  period: string;
  /** The larger of the used shares of the token and the dollar limit (0..1, may pass 1). */
  fraction: number;
  usedTokens: number;
  maxTokens: number | null;
  usedCostUsd: number;
  maxCostUsd: number | null;
  resetsAt: number | null;
}

/** How much of a budget is used (tokens or dollars, whichever is nearer its limit); `null`
 *  when the budget has neither limit (only rate limits). */
export function usedFraction(row: RemainingRow): number | null {
  const shares: number[] = [];
  if (row.max_tokens !== null) {
    shares.push(row.max_tokens > 0 ? row.used_tokens / row.max_tokens : 1);
  }
  if (row.max_cost_usd !== null) {
    shares.push(row.max_cost_usd > 0 ? row.used_cost_usd / row.max_cost_usd : 1);
  }
  return shares.length ? Math.max(...shares) : null;
}

/** The budgets at least `threshold` used, from each student's remaining budgets: a student's
 *  own (or the default for every student) per student, the course's total once. The fullest
 *  first. */
export function nearBudget(
  perStudent: readonly { userId: string; rows: readonly RemainingRow[] }[],
  threshold = 0.8,
): NearBudget[] {
  const found: NearBudget[] = [];
  const courseSeen = new Set<string>();
  for (const { userId, rows } of perStudent) {
    for (const row of rows) {
      const fraction = usedFraction(row);
      if (fraction === null || fraction < threshold) continue;
      const shared = row.scope === "course";
      if (shared) {
        if (courseSeen.has(row.budget_id)) continue;
        courseSeen.add(row.budget_id);
      }
      found.push({
        userId: shared ? null : userId,
        budgetId: row.budget_id,
        scope: row.scope,
        period: row.period,
        fraction,
        usedTokens: row.used_tokens,
        maxTokens: row.max_tokens,
        usedCostUsd: row.used_cost_usd,
        maxCostUsd: row.max_cost_usd,
        resetsAt: row.resets_at,
      });
    }
  }
  return found.sort((a, b) => b.fraction - a.fraction);
}
