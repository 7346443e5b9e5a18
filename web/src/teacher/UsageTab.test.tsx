import "./test-fetch"; // first: before the API client is made
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { type Call, courseRoutes, fakeService, member, renderAt, seriousViolations } from "./testing";

// jsdom has no canvas: the charts are stood in for by their accessible names
vi.mock("./charts", () => ({
  TokensPerDayChart: ({ label }: { label: string }) => <div role="img" aria-label={label} />,
  PerStudentChart: ({ label }: { label: string }) => <div role="img" aria-label={label} />,
}));

const members = [member("usr_a", "ann@school.edu"), member("usr_b", "bob@school.edu")];
const today = new Date().toISOString().slice(0, 10);

function usage(user_id: string, input: number, cost: number) {
  return {
    course_id: "crs_1",
    user_id,
    day: today,
    source: "agent",
    requests: 2,
    input_tokens: input,
    output_tokens: 0,
    cost_usd: cost,
    cached_tokens: 0,
    compaction_saved_tokens: 0,
  };
}

function remaining(call: Call) {
  const used = call.query.get("user_id") === "usr_a" ? 900 : 100;
  return {
    body: [
      {
        budget_id: "bud_default",
        scope: "student",
        period: "day",
        max_tokens: 1000,
        max_cost_usd: null,
        used_tokens: used,
        used_cost_usd: 0,
        reserved_tokens: 0,
        reserved_cost_usd: 0,
        resets_at: 1_900_000_000,
      },
    ],
  };
}

const defaultBudget = {
  id: "bud_default",
  course_id: "crs_1",
  scope: "student",
  user_id: "",
  period: "day",
  max_tokens: 1000,
  max_cost_usd: null,
  requests_per_minute: 30,
  max_concurrent: null,
  updated_at: 1_700_000_000,
};

describe("Usage", () => {
  it("sums usage per student, flags budgets near their limit, sets and deletes budgets", async () => {
    const service = fakeService({
      ...courseRoutes(members),
      "GET /api/courses/crs_1/usage": [usage("usr_a", 900, 0.09), usage("usr_b", 100, 0.01)],
      "GET /api/courses/crs_1/remaining": remaining,
      "GET /api/courses/crs_1/budgets": [defaultBudget],
      "PUT /api/courses/crs_1/budgets": (call: Call) => ({
        body: { ...defaultBudget, id: "bud_b", ...(call.body as object) },
      }),
      "DELETE /api/courses/crs_1/budgets/bud_default": () => ({ status: 204 }),
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/usage");

    const perStudent = await screen.findByRole("table", { name: "Usage per student" });
    const rows = within(perStudent).getAllByRole("row");
    expect(within(rows[1]!).getByRole("rowheader")).toHaveTextContent("ann@school.edu");
    expect(rows[1]).toHaveTextContent("900");
    expect(within(rows[3]!).getByRole("rowheader")).toHaveTextContent("Total");
    expect(rows[3]).toHaveTextContent("1,000");
    expect(screen.getByRole("img", { name: /tokens per day .* stacked by student/ })).toBeInTheDocument();
    await user.click(screen.getByRole("radio", { name: "Total" }));
    expect(screen.getByRole("img", { name: /total tokens per day/ })).toBeInTheDocument();
    const usageCall = service.calls.find((c) => c.path.endsWith("/usage"))!;
    expect(usageCall.query.get("until")).toBe(today);

    const near = await screen.findByRole("region", { name: "Near their budget (80% or more used)" });
    await waitFor(() => expect(within(near).getByRole("meter")).toBeInTheDocument());
    expect(within(near).getByRole("rowheader")).toHaveTextContent("ann@school.edu");
    expect(within(near).getByText("90% used")).toBeInTheDocument();
    expect(within(near).queryByText("bob@school.edu")).toBeNull();

    const budgets = screen.getByRole("region", { name: "Budgets" });
    expect(within(budgets).getByRole("rowheader", { name: "Every student (default)" })).toBeInTheDocument();
    await user.selectOptions(within(budgets).getByLabelText("Applies to"), "bob@school.edu");
    await user.selectOptions(within(budgets).getByLabelText("Period"), "week");
    await user.type(within(budgets).getByLabelText("Max tokens"), "50,000");
    await user.type(within(budgets).getByLabelText("Max cost (USD)"), "2.5");
    await user.click(within(budgets).getByRole("button", { name: "Save budget" }));
    expect(await within(budgets).findByText("Budget saved: bob@school.edu.")).toBeInTheDocument();
    expect(service.calls.find((c) => c.method === "PUT")!.body).toEqual({
      scope: "student",
      user_id: "usr_b",
      period: "week",
      max_tokens: 50000,
      max_cost_usd: 2.5,
      requests_per_minute: null,
      max_concurrent: null,
    });

    await user.type(within(budgets).getByLabelText("Concurrent calls"), "two");
    await user.click(within(budgets).getByRole("button", { name: "Save budget" }));
    expect(within(budgets).getByRole("alert")).toHaveTextContent("Not a valid number: Concurrent calls.");

    expect(await seriousViolations(document.body)).toEqual([]);

    await user.click(
      within(budgets).getByRole("button", { name: "Delete, Every student (default)" }),
    );
    const dialog = screen.getByRole("dialog", {
      name: "Delete the budget of Every student (default)?",
    });
    await user.click(within(dialog).getByRole("button", { name: "Delete budget" }));
    expect(
      await within(budgets).findByText("Budget deleted: Every student (default)."),
    ).toBeInTheDocument();
  }, 20_000);

  it("says when there is no usage", async () => {
    fakeService({
      ...courseRoutes(members),
      "GET /api/courses/crs_1/usage": [],
      "GET /api/courses/crs_1/remaining": [],
      "GET /api/courses/crs_1/budgets": [],
    });
    renderAt("/teach/crs_1/usage");
    expect(await screen.findByText("No usage in these days.")).toBeInTheDocument();
    expect(screen.queryByRole("img")).toBeNull();
    expect(
      await screen.findByText("No budgets: students can use the model without a limit."),
    ).toBeInTheDocument();
  });
});
