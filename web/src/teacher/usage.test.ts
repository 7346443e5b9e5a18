import {
  daysBetween,
  defaultRange,
  grandTotal,
  nearBudget,
  OTHERS,
  tokensPerDay,
  totalsByStudent,
  usedFraction,
  type RemainingRow,
  type UsageRow,
} from "./usage";

function row(user_id: string, day: string, input: number, output: number, cost = 0): UsageRow {
  return {
    course_id: "c1",
    user_id,
    day,
    source: "agent",
    requests: 1,
    input_tokens: input,
    output_tokens: output,
    cost_usd: cost,
    cached_tokens: 0,
    compaction_saved_tokens: 0,
  };
}

function remaining(partial: Partial<RemainingRow>): RemainingRow {
  return {
    budget_id: "b1",
    scope: "student",
    period: "day",
    max_tokens: null,
    max_cost_usd: null,
    used_tokens: 0,
    used_cost_usd: 0,
    reserved_tokens: 0,
    reserved_cost_usd: 0,
    resets_at: null,
    ...partial,
  };
}

describe("totalsByStudent", () => {
  it("sums each student's rows (several sources a day too), the largest first", () => {
    const rows = [
      row("ann", "2026-03-01", 100, 50, 0.01),
      row("bob", "2026-03-01", 10, 5, 0.001),
      row("ann", "2026-03-02", 200, 100, 0.02),
      { ...row("bob", "2026-03-02", 1000, 0, 0.5), source: "gateway" },
    ];
    const totals = totalsByStudent(rows);
    expect(totals.map((t) => t.userId)).toEqual(["bob", "ann"]);
    expect(totals[1]).toEqual({
      userId: "ann",
      requests: 2,
      inputTokens: 300,
      outputTokens: 150,
      tokens: 450,
      costUsd: 0.03,
    });
    const all = grandTotal(totals);
    expect(all.tokens).toBe(1465);
    expect(all.requests).toBe(4);
    expect(all.costUsd).toBeCloseTo(0.531);
  });
});

describe("days", () => {
  it("lists the days of a range, both ends included, across a month's end", () => {
    expect(daysBetween("2026-02-27", "2026-03-02")).toEqual([
      "2026-02-27",
      "2026-02-28",
      "2026-03-01",
      "2026-03-02",
    ]);
  });

  it("gives nothing for a reversed or malformed range, and caps a long one", () => {
    expect(daysBetween("2026-03-02", "2026-03-01")).toEqual([]);
    expect(daysBetween("", "2026-03-01")).toEqual([]);
    const capped = daysBetween("2020-01-01", "2026-01-01", 10);
    expect(capped).toHaveLength(10);
    expect(capped[9]).toBe("2026-01-01");
  });

  it("defaults to the last 14 UTC days", () => {
    expect(defaultRange(new Date("2026-03-14T23:30:00Z"))).toEqual({
      since: "2026-03-01",
      until: "2026-03-14",
    });
  });
});

describe("tokensPerDay", () => {
  const rows = [
    row("ann", "2026-03-01", 100, 0, 0.5),
    row("bob", "2026-03-03", 30, 0, 0.25),
    row("cy", "2026-03-03", 20, 0),
    row("ann", "2026-03-03", 5, 5),
  ];

  it("fills the range's quiet days with zeros, one series per student", () => {
    const daily = tokensPerDay(rows, { since: "2026-02-28", until: "2026-03-03" });
    expect(daily.days).toEqual(["2026-02-28", "2026-03-01", "2026-03-02", "2026-03-03"]);
    expect(daily.series).toEqual([
      { userId: "ann", tokens: [0, 100, 0, 10] },
      { userId: "bob", tokens: [0, 0, 0, 30] },
      { userId: "cy", tokens: [0, 0, 0, 20] },
    ]);
    expect(daily.totals).toEqual([0, 100, 0, 60]);
    expect(daily.costs).toEqual([0, 0.5, 0, 0.25]);
  });

  it("spans the data's days without a range and groups the smallest students", () => {
    const daily = tokensPerDay(rows, undefined, 2);
    expect(daily.days).toEqual(["2026-03-01", "2026-03-02", "2026-03-03"]);
    expect(daily.series).toEqual([
      { userId: "ann", tokens: [100, 0, 10] },
      { userId: OTHERS, tokens: [0, 0, 50] },
    ]);
  });

  it("is empty without rows", () => {
    expect(tokensPerDay([])).toEqual({ days: [], series: [], totals: [], costs: [] });
  });
});

describe("budgets near their limit", () => {
  it("takes the fuller of the token and dollar shares; none without limits", () => {
    expect(usedFraction(remaining({ max_tokens: 1000, used_tokens: 500 }))).toBe(0.5);
    expect(
      usedFraction(
        remaining({ max_tokens: 1000, used_tokens: 100, max_cost_usd: 2, used_cost_usd: 1.8 }),
      ),
    ).toBeCloseTo(0.9);
    expect(usedFraction(remaining({ max_tokens: 0 }))).toBe(1);
    expect(usedFraction(remaining({}))).toBeNull();
  });

  it("flags budgets used 80% or more, the course's total once", () => {
    const course = remaining({
      budget_id: "bc",
      scope: "course",
      period: "course",
      max_tokens: 1000,
      used_tokens: 850,
    });
    const found = nearBudget([
      {
        userId: "ann",
        rows: [remaining({ budget_id: "b1", max_tokens: 100, used_tokens: 95 }), course],
      },
      { userId: "bob", rows: [remaining({ budget_id: "b1", max_tokens: 100, used_tokens: 79 }), course] },
    ]);
    expect(found.map((f) => [f.userId, f.budgetId, f.fraction])).toEqual([
      ["ann", "b1", 0.95],
      [null, "bc", 0.85],
    ]);
  });
});
