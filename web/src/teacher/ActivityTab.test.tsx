import "./test-fetch"; // first: before the API client is made
import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { courseRoutes, fakeService, member, renderAt, seriousViolations } from "./testing";

const members = [member("usr_a", "ann@school.edu"), member("usr_b", "bob@school.edu")];
const now = Date.now() / 1000;

function session(id: string, user_id: string, title: string, active: boolean, updated_at: number) {
  return {
    id,
    user_id,
    course_id: "crs_1",
    title,
    created_at: updated_at - 100,
    updated_at,
    last_seq: 3,
    runtime: id === "s2" ? "lanes" : "",
    active,
  };
}

describe("Activity", () => {
  it("lists running sessions first, with the student, runtime and actions", async () => {
    const service = fakeService({
      ...courseRoutes(members),
      "GET /api/sessions": [
        session("s1", "usr_a", "Old one", false, now - 60),
        session("s2", "usr_b", "Busy", true, now - 3600),
      ],
    });
    renderAt("/teach/crs_1/activity");
    const rows = await screen.findAllByRole("row");
    expect(within(rows[1]!).getByText("Running")).toBeInTheDocument();
    expect(within(rows[1]!).getByRole("rowheader")).toHaveTextContent("bob@school.edu");
    expect(within(rows[1]!).getByText("Lanes")).toBeInTheDocument();
    expect(within(rows[2]!).getByText("Serial")).toBeInTheDocument(); // the server's
    expect(screen.getByRole("link", { name: "Open, bob@school.edu: Busy" })).toHaveAttribute(
      "href",
      "/sessions/s2",
    );
    expect(screen.getByRole("button", { name: "Interrupt, ann@school.edu: Old one" })).toBeDisabled();
    const list = service.calls.find((c) => c.path === "/api/sessions")!;
    expect(list.query.get("course_id")).toBe("crs_1");
    expect(list.query.get("limit")).toBe("100");
    expect(await seriousViolations(document.body)).toEqual([]);
  });

  it("shows the server's refusal of an interruption", async () => {
    fakeService({
      ...courseRoutes(members),
      "GET /api/sessions": [session("s2", "usr_b", "Busy", true, now)],
      "POST /api/sessions/s2/cancel": () => ({
        status: 409,
        body: { error: { type: "conflict", message: "nothing is running in this session" } },
      }),
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/activity");
    await user.click(await screen.findByRole("button", { name: /^Interrupt/ }));
    expect(await screen.findByText("nothing is running in this session")).toBeInTheDocument();
  });

  it("sends a teacher's message to a session's agent", async () => {
    const service = fakeService({
      ...courseRoutes(members),
      "GET /api/sessions": [session("s1", "usr_a", "Essay", false, now)],
      "POST /api/sessions/s1/teacher-messages": { status: 202, body: {} },
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/activity");
    await user.click(await screen.findByRole("button", { name: "Message, ann@school.edu: Essay" }));
    await user.type(
      screen.getByLabelText("Message to the agent of ann@school.edu"),
      "Cite your sources.",
    );
    await user.click(screen.getByRole("button", { name: "Send message" }));
    expect(
      await screen.findByText("Message sent to the agent of ann@school.edu."),
    ).toBeInTheDocument();
    const post = service.calls.find((c) => c.method === "POST")!;
    expect(post.path).toBe("/api/sessions/s1/teacher-messages");
    expect(post.body).toEqual({ text: "Cite your sources." });
    expect(screen.queryByLabelText("Message to the agent of ann@school.edu")).toBeNull();
  });
});
