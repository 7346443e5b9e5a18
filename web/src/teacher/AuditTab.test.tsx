import "./test-fetch"; // first: before the API client is made
import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { type Call, courseRoutes, fakeService, member, renderAt, seriousViolations } from "./testing";

const members = [member("usr_t", "teacher@school.edu", "teacher"), member("usr_a", "ann@school.edu")];

function record(id: number) {
  return {
    id,
    chain: "crs_1",
    seq: id,
    ts: 1_700_000_000 + id,
    actor_id: id % 2 ? "usr_a" : "",
    kind: "model_call",
    subject: `ses_${id}`,
    data: { tokens: id * 10 },
    hash: `h${id}`,
  };
}

/** The audit search over `count` records (`after_id`, `limit` as the service reads them). */
function audit(count: number) {
  const all = Array.from({ length: count }, (_, i) => record(i + 1));
  return (call: Call) => {
    const after = Number(call.query.get("after_id") ?? 0);
    const limit = Number(call.query.get("limit"));
    return { body: all.filter((r) => r.id > after).slice(0, limit) };
  };
}

describe("Audit", () => {
  it("pages through the records with after_id", async () => {
    const service = fakeService({
      ...courseRoutes(members),
      "GET /api/courses/crs_1/audit": audit(130),
      "GET /api/courses/crs_1/audit/verify": [
        { chain: "crs_1", records: 130, ok: true, problem: null, first_bad_seq: null },
      ],
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/audit");
    expect(await screen.findByText("Intact")).toBeInTheDocument();
    expect(screen.getByText(/130 records checked/)).toBeInTheDocument();
    expect(await screen.findByText("100 records shown; there are more.")).toBeInTheDocument();
    await user.click(screen.getByText("Load more"));
    expect(await screen.findByText("130 records.")).toBeInTheDocument();
    expect(screen.queryByText("Load more")).toBeNull();
    const pages = service.calls.filter((c) => c.path.endsWith("/audit"));
    expect(pages.map((c) => c.query.get("after_id"))).toEqual([null, "100"]);
  }, 20_000);

  it("searches with the filters, exports with the same ones, opens a record", async () => {
    const service = fakeService({
      ...courseRoutes(members),
      "GET /api/courses/crs_1/audit": audit(3),
      "GET /api/courses/crs_1/audit/verify": [
        { chain: "crs_1", records: 9, ok: false, problem: "record 4 was altered", first_bad_seq: 4 },
      ],
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/audit");
    expect(await screen.findByText("Broken")).toBeInTheDocument();
    expect(screen.getByText(/First bad record: #4\./)).toBeInTheDocument();
    expect(screen.getByText(/record 4 was altered/)).toBeInTheDocument();

    await user.selectOptions(await screen.findByLabelText("Member"), "ann@school.edu");
    await user.type(screen.getByLabelText("Kind"), "tool_call");
    await user.type(screen.getByLabelText("From"), "2026-03-01T09:30");
    await user.click(screen.getByRole("button", { name: "Search" }));
    await screen.findAllByText("ann@school.edu");
    const last = service.calls.filter((c) => c.path.endsWith("/audit")).at(-1)!;
    expect(last.query.get("actor_id")).toBe("usr_a");
    expect(last.query.get("kind")).toBe("tool_call");
    expect(last.query.get("since")).toBe(new Date(2026, 2, 1, 9, 30).toISOString());
    expect(last.query.has("until")).toBe(false);
    const csv = screen.getByRole("link", { name: "Export CSV" });
    expect(csv).toHaveAttribute("download");
    expect(csv.getAttribute("href")).toBe(
      `/api/courses/crs_1/audit/export?format=csv&actor_id=usr_a&kind=tool_call&since=${encodeURIComponent(
        new Date(2026, 2, 1, 9, 30).toISOString(),
      )}`,
    );

    screen.getByRole("button", { name: "Show record #3" }).focus();
    await user.keyboard("{Enter}");
    const dialog = screen.getByRole("dialog", { name: "Record #3: model_call" });
    expect(within(dialog).getByText(/"tokens": 30/)).toBeInTheDocument();
    expect(within(dialog).getByText("ann@school.edu")).toBeInTheDocument();
    expect(await seriousViolations(document.body)).toEqual([]);
    await user.click(within(dialog).getByRole("button", { name: "Close" }));
    expect(screen.queryByRole("dialog")).toBeNull();
  }, 20_000);
});
