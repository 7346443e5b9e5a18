import "./test-fetch"; // first: before the API client is made
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { download } from "../components/common";
import { courseRoutes, fakeService, member, renderAt, seriousViolations } from "./testing";

vi.mock("../components/common", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../components/common")>()),
  download: vi.fn(),
}));

const members = [
  member("usr_t", "teacher@school.edu", "teacher"),
  member("usr_a", "ann@school.edu"),
  member("usr_b", "bob@school.edu"),
];

function provisioned(id: string, email: string, created: boolean, token: string | null) {
  return {
    user: { id, email, name: email.split("@")[0], role: "student", active: true, created_at: 0 },
    created,
    token,
    connect: token ? `agentica connect --server http://h:8000 --token ${token} --workspace .` : null,
  };
}

describe("Roster", () => {
  beforeEach(() => vi.mocked(download).mockClear());

  it("lists the members with their roles and actions", async () => {
    fakeService(courseRoutes(members));
    renderAt("/teach/crs_1/roster");
    const table = await screen.findByRole("table");
    expect(within(table).getAllByRole("columnheader").map((h) => h.textContent)).toEqual([
      "E-mail",
      "Name",
      "Role",
      "Account",
      "Added",
      "Actions",
    ]);
    expect(screen.getByRole("rowheader", { name: "ann@school.edu" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Re-issue token, ann@school.edu" })).toBeEnabled();
    // a teacher cannot remove themself, and has no student token to re-issue
    expect(screen.queryByRole("button", { name: "Remove, teacher@school.edu" })).toBeNull();
    expect(screen.getByRole("link", { name: "Roster" })).toHaveAttribute("aria-current", "page");
  });

  it("adds students from pasted e-mails and offers the connect lines once, as CSV", async () => {
    const service = fakeService({
      ...courseRoutes(members),
      "POST /api/courses/crs_1/students": () => ({
        status: 201,
        body: [
          provisioned("usr_c", "cy@school.edu", true, "agt_c"),
          provisioned("usr_a", "ann@school.edu", false, null),
        ],
      }),
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/roster");
    const box = await screen.findByLabelText("Students' e-mails or CSV");
    await user.type(box, "cy@school.edu{enter}ann@school.edu");
    expect(screen.getByText("2 e-mails")).toBeInTheDocument();
    await user.click(screen.getByRole("button", { name: "Add students" }));

    await screen.findByRole("heading", { name: "Students added" });
    const post = service.calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ roster: "cy@school.edu\nann@school.edu" });
    expect(screen.getAllByText(/2 students in the course \(1 new accounts\); 1 new tokens/)).not.toHaveLength(0);
    expect(screen.getByText("agt_c")).toBeInTheDocument();
    expect(screen.getByText(/Already has a token/)).toBeInTheDocument();
    expect(box).toHaveValue("");

    await user.click(screen.getByRole("button", { name: "Download connect lines (CSV)" }));
    const [name, text] = vi.mocked(download).mock.calls[0]!;
    expect(name).toBe("web-2026-connect-lines.csv");
    expect(text.slice(1).split("\r\n").slice(0, 2)).toEqual([
      "email,name,token,connect",
      "cy@school.edu,cy,agt_c,agentica connect --server http://h:8000 --token agt_c --workspace .",
    ]);
    expect(await seriousViolations(document.body)).toEqual([]);

    await user.click(screen.getByRole("button", { name: "Hide tokens" }));
    expect(screen.queryByText("agt_c")).toBeNull();
  });

  it("reads a CSV file into the roster box", async () => {
    fakeService(courseRoutes(members));
    const user = userEvent.setup();
    renderAt("/teach/crs_1/roster");
    const file = new File(["email,name\ndee@school.edu,Dee\n"], "class.csv", { type: "text/csv" });
    await user.upload(await screen.findByLabelText("Or read a CSV file"), file);
    await waitFor(() =>
      expect(screen.getByLabelText("Students' e-mails or CSV")).toHaveValue(
        "email,name\ndee@school.edu,Dee\n",
      ),
    );
    expect(screen.getByText(/Read class.csv/)).toBeInTheDocument();
    expect(screen.getByText("1 e-mail")).toBeInTheDocument();
  });

  it("removes a member after confirming, and shows the server's refusal", async () => {
    let refuse = true;
    const service = fakeService({
      ...courseRoutes(members),
      "DELETE /api/courses/crs_1/members/usr_b": () =>
        refuse
          ? { status: 403, body: { error: { type: "forbidden", message: "not today" } } }
          : { status: 204 },
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/roster");
    await user.click(await screen.findByRole("button", { name: "Remove, bob@school.edu" }));
    const dialog = screen.getByRole("dialog", { name: "Remove bob@school.edu from the course?" });
    await user.click(within(dialog).getByRole("button", { name: "Remove from course" }));
    expect(await within(dialog).findByRole("alert")).toHaveTextContent("not today");
    refuse = false;
    await user.click(within(dialog).getByRole("button", { name: "Remove from course" }));
    expect(await screen.findByText("bob@school.edu was removed from the course.")).toBeInTheDocument();
    expect(service.calls.filter((c) => c.method === "DELETE")).toHaveLength(2);
    expect(screen.queryByRole("dialog")).toBeNull();
  });

  it("re-issues a student's token and shows it once", async () => {
    fakeService({
      ...courseRoutes(members),
      "POST /api/courses/crs_1/students/usr_a/token": {
        id: "tok",
        name: "course web-2026",
        hint: "agt_n…",
        created_at: 0,
        expires_at: 0,
        revoked_at: null,
        last_used_at: null,
        token: "agt_new",
        connect: "agentica connect --server http://h:8000 --token agt_new --workspace .",
      },
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/roster");
    await user.click(await screen.findByRole("button", { name: "Re-issue token, ann@school.edu" }));
    const dialog = screen.getByRole("dialog", { name: "Re-issue the token of ann@school.edu?" });
    await user.click(within(dialog).getByRole("button", { name: "Re-issue token" }));
    await screen.findByRole("heading", { name: "New token" });
    expect(screen.getByText("agt_new")).toBeInTheDocument();
    expect(screen.getByText(/agentica connect .* --token agt_new/)).toBeInTheDocument();
  });
});
