import { auditQuery, emptyFilters, exportUrl, localToIso } from "./audit";

describe("audit filters", () => {
  it("leaves empty filters out", () => {
    expect(auditQuery(emptyFilters)).toEqual({});
  });

  it("turns a local date and time into UTC ISO 8601", () => {
    const local = "2026-03-01T09:30";
    expect(localToIso(local)).toBe(new Date(2026, 2, 1, 9, 30).toISOString());
    expect(localToIso("")).toBeUndefined();
    expect(localToIso("not a time")).toBeUndefined();
  });

  it("maps the student, kind and times to the query", () => {
    const query = auditQuery({
      actorId: "usr_1",
      kind: " model_call ",
      since: "2026-03-01T00:00",
      until: "",
    });
    expect(query).toEqual({
      actor_id: "usr_1",
      kind: "model_call",
      since: new Date(2026, 2, 1).toISOString(),
    });
  });

  it("builds export links with the same filters", () => {
    const url = exportUrl("crs 1", "csv", { ...emptyFilters, kind: "tool_call" });
    expect(url).toBe("/api/courses/crs%201/audit/export?format=csv&kind=tool_call");
  });
});
