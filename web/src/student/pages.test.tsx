import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { AccountPage, usageByDay } from "./AccountPage";
import { connectLine, ExecutorsPage } from "./ExecutorsPage";
import { SessionsPage } from "./SessionsPage";
import { axeViolations, fakeApi, renderPage, server } from "./test-utils";

const sessions = [
  { id: "s_old", user_id: "u_alice", course_id: "c1", title: "Old one", created_at: 1, updated_at: 1_700_000_000, last_seq: 3, runtime: "", active: false },
  { id: "s_new", user_id: "u_alice", course_id: "c1", title: "", created_at: 2, updated_at: 1_700_000_900, last_seq: 9, runtime: "lanes", active: true },
];

beforeEach(() => {
  window.scrollTo = vi.fn() as never;
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("SessionsPage", () => {
  it("lists the sessions newest first, with their state, course and runtime", async () => {
    fakeApi().on("GET", "/api/sessions", sessions);
    const { container } = renderPage(<SessionsPage />, "/sessions");
    const list = await screen.findByRole("list");
    const rows = within(list).getAllByRole("listitem");
    expect(rows.map((row) => within(row).getByRole("link").textContent)).toEqual([
      "Untitled session",
      "Old one",
    ]);
    expect(within(rows[0]!).getByText("Working")).toBeInTheDocument();
    expect(within(rows[0]!).getByText("Parallel lanes")).toBeInTheDocument();
    expect(within(rows[1]!).getByText("One message at a time")).toBeInTheDocument(); // the server's
    expect(within(rows[1]!).getByText("Algorithms")).toBeInTheDocument();
    expect(within(rows[0]!).getByRole("link")).toHaveAttribute("href", "/sessions/s_new");
    expect(await axeViolations(container)).toEqual([]);
  });

  it("creates a session in a course, with a title and a runtime, and opens it", async () => {
    const api = fakeApi()
      .on("GET", "/api/sessions", [])
      .on("POST", "/api/sessions", { ...sessions[0], id: "s_made" });
    renderPage(<SessionsPage />, "/sessions", "/sessions");
    expect(await screen.findByText(/No sessions yet/)).toBeInTheDocument();
    await screen.findByRole("option", { name: "Algorithms" });
    await userEvent.type(screen.getByLabelText("Title (optional)"), "Graphs");
    await userEvent.selectOptions(screen.getByLabelText("How the agent works"), "lanes");
    await userEvent.click(screen.getByRole("button", { name: "Create session" }));
    await waitFor(() => expect(api.called("POST", "/api/sessions")).toHaveLength(1));
    expect(api.called("POST", "/api/sessions")[0]?.body).toEqual({
      course_id: "c1",
      title: "Graphs",
      runtime: "lanes",
    });
    expect(await screen.findByText("elsewhere")).toBeInTheDocument(); // went to /sessions/s_made
  });

  it("renames in place (Escape cancels) and deletes after a confirmation", async () => {
    const api = fakeApi()
      .on("GET", "/api/sessions", sessions)
      .on("PATCH", "/api/sessions/{session_id}", { ...sessions[0], title: "Sorting" })
      .on("DELETE", "/api/sessions/{session_id}", undefined);
    renderPage(<SessionsPage />, "/sessions");
    await userEvent.click(await screen.findByRole("button", { name: "Rename “Old one”" }));
    const input = screen.getByLabelText("New title");
    expect(input).toHaveFocus();
    await userEvent.keyboard("{Escape}");
    expect(screen.queryByLabelText("New title")).toBeNull();

    await userEvent.click(screen.getByRole("button", { name: "Rename “Old one”" }));
    await userEvent.clear(screen.getByLabelText("New title"));
    await userEvent.type(screen.getByLabelText("New title"), "Sorting{Enter}");
    await waitFor(() => expect(api.called("PATCH", "/api/sessions/{session_id}")).toHaveLength(1));
    expect(api.called("PATCH", "/api/sessions/{session_id}")[0]).toMatchObject({
      params: { path: { session_id: "s_old" } },
      body: { title: "Sorting" },
    });

    await userEvent.click(screen.getByRole("button", { name: "Delete “Old one”" }));
    const confirm = screen.getByRole("group", { name: "Delete this session?" });
    expect(within(confirm).getByRole("button", { name: "Cancel" })).toHaveFocus();
    expect(api.called("DELETE", "/api/sessions/{session_id}")).toHaveLength(0);
    await userEvent.click(within(confirm).getByRole("button", { name: "Delete for good" }));
    await waitFor(() => expect(api.called("DELETE", "/api/sessions/{session_id}")).toHaveLength(1));
  });
});

describe("ExecutorsPage", () => {
  it("lists the connected computers and shows a new connect line once", async () => {
    const api = fakeApi()
      .on("GET", "/api/executors", [
        { id: "x_1", name: "laptop", workspace: "/home/alice/hw", can: ["commands", "files"], sandboxed: true, connected_at: 1_700_000_000 },
      ])
      .on("POST", "/api/me/tokens", {
        id: "t1", name: "connect", hint: "agt_abcd", created_at: 1, expires_at: 2, revoked_at: null, last_used_at: null,
        token: "agt_secret", connect: "agentica connect --server http://class.example --token agt_secret --workspace .",
      });
    const { container } = renderPage(<ExecutorsPage />, "/executors");
    expect(await screen.findByText("laptop")).toBeInTheDocument();
    expect(screen.getByText("/home/alice/hw")).toBeInTheDocument();
    expect(screen.getByText("Sandboxed")).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Create connection command" }));
    const line = await screen.findByLabelText("Connection command");
    expect(line).toHaveValue("agentica connect --server http://class.example --token agt_secret --workspace .");
    expect(screen.getByText("Shown only once.")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Copy" })).toBeInTheDocument();
    expect(api.called("POST", "/api/me/tokens")).toHaveLength(1);
    expect(await axeViolations(container)).toEqual([]);
  });

  it("makes the connect line from the server's address when the answer has none", () => {
    const issued = {
      id: "t", name: "n", hint: "h", created_at: 1, expires_at: 2, revoked_at: null, last_used_at: null,
      token: "agt_x", connect: null,
    };
    expect(connectLine(issued, server)).toBe(
      "agentica connect --server http://class.example --token agt_x --workspace .",
    );
  });
});

describe("AccountPage", () => {
  const remaining = [
    { budget_id: "b1", scope: "student", period: "day", max_tokens: 10_000, max_cost_usd: null, used_tokens: 9_000, used_cost_usd: 0.5, reserved_tokens: 500, reserved_cost_usd: 0, resets_at: 1_900_000_000 },
  ];
  const usage = [
    { course_id: "c1", user_id: "u", day: "2026-03-01", source: "agent", requests: 3, input_tokens: 100, output_tokens: 10, cost_usd: 0.01, cached_tokens: 0, compaction_saved_tokens: 0 },
    { course_id: "c1", user_id: "u", day: "2026-03-01", source: "gateway", requests: 1, input_tokens: 50, output_tokens: 5, cost_usd: 0.02, cached_tokens: 0, compaction_saved_tokens: 0 },
    { course_id: "c1", user_id: "u", day: "2026-03-02", source: "agent", requests: 2, input_tokens: 20, output_tokens: 2, cost_usd: 0, cached_tokens: 0, compaction_saved_tokens: 0 },
  ];
  const tokens = [
    { id: "t1", name: "laptop", hint: "agt_ab", created_at: 1_700_000_000, expires_at: 4_000_000_000, revoked_at: null, last_used_at: null },
    { id: "t2", name: "old", hint: "agt_cd", created_at: 1_600_000_000, expires_at: 4_000_000_000, revoked_at: 1_650_000_000, last_used_at: null },
  ];

  it("sums usage per day, newest first", () => {
    expect(usageByDay(usage)).toEqual([
      { day: "2026-03-02", requests: 2, input: 20, output: 2, cost: 0 },
      { day: "2026-03-01", requests: 4, input: 150, output: 15, cost: 0.03 },
    ]);
  });

  it("shows the budget, the usage, the tokens and the gateway", async () => {
    const api = fakeApi()
      .on("GET", "/api/courses/{course_id}/remaining", remaining)
      .on("GET", "/api/courses/{course_id}/usage", usage)
      .on("GET", "/api/me/tokens", tokens)
      .on("POST", "/api/me/tokens", { ...tokens[0], id: "t3", name: "ci", token: "agt_new_secret", connect: null })
      .on("DELETE", "/api/me/tokens/{token_id}", undefined);
    const { container } = renderPage(<AccountPage />, "/account");
    const meter = await screen.findByRole("meter", { name: "Your budget today: tokens used" });
    expect(meter).toHaveAttribute("aria-valuenow", "9500");
    expect(meter).toHaveAttribute("aria-valuemax", "10000");
    expect(screen.getByText("500 left")).toBeInTheDocument();
    const table = await screen.findByRole("table", { name: "Your usage (last 30 days)" });
    expect(within(table).getAllByRole("row")).toHaveLength(4); // head, two days, total
    expect(screen.getByText("http://class.example/v1")).toBeInTheDocument();
    expect(screen.getByText(/model="algo"/)).toBeInTheDocument();

    await userEvent.type(screen.getByLabelText("Token name"), "ci");
    await userEvent.click(screen.getByRole("button", { name: "Create token" }));
    expect(await screen.findByLabelText("Your new token")).toHaveValue("agt_new_secret");
    expect(api.called("POST", "/api/me/tokens")[0]?.body).toEqual({ name: "ci" });

    // only the active token can be revoked, after a confirmation
    expect(screen.queryByRole("button", { name: "Revoke token old" })).toBeNull();
    await userEvent.click(screen.getByRole("button", { name: "Revoke token laptop" }));
    await userEvent.click(screen.getByRole("button", { name: "Revoke now" }));
    await waitFor(() => expect(api.called("DELETE", "/api/me/tokens/{token_id}")).toHaveLength(1));
    expect(api.called("DELETE", "/api/me/tokens/{token_id}")[0]?.params.path).toEqual({ token_id: "t1" });
    expect(await axeViolations(container)).toEqual([]);
  });
});
