import "./test-fetch"; // first: before the API client is made
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { type Call, courseRoutes, fakeService, member, renderAt, seriousViolations } from "./testing";

const members = [member("usr_t", "teacher@school.edu", "teacher"), member("usr_a", "ann@school.edu")];

function answer(id: string, question: string, offered: number, tokens = 120) {
  return {
    id,
    question,
    answer: `The answer to: ${question}`,
    tokens,
    created_at: 1_700_000_000,
    offered,
    tokens_saved: offered * tokens,
  };
}

/** The course's material and shared answers, changed by the calls as the service would. */
function knowledgeService() {
  const files = ["syllabus.md", "lab 1.pdf"];
  const answers = [
    answer("a_1", "When is the exam?", 3),
    answer("a_2", "How do I run the tests?", 2, 300),
  ];
  const service = fakeService({
    ...courseRoutes(members),
    "GET /api/courses/crs_1/knowledge": () => ({ body: files.map((name) => ({ name, chunks: null })) }),
    "PUT /api/courses/crs_1/knowledge/week%201%20notes.md": () => {
      files.push("week 1 notes.md");
      return { body: { name: "week 1 notes.md", chunks: 7 } };
    },
    "PUT /api/courses/crs_1/knowledge/big.pdf": () => ({
      status: 413,
      body: {
        error: {
          type: "too_large",
          message: "the request body is larger than 1048576 bytes; send less",
        },
      },
    }),
    "DELETE /api/courses/crs_1/knowledge/syllabus.md": () => {
      files.splice(files.indexOf("syllabus.md"), 1);
      return { status: 204 };
    },
    "GET /api/courses/crs_1/shared-answers": () => ({ body: answers }),
    "POST /api/courses/crs_1/shared-answers": (call: Call) => {
      const body = call.body as { question: string; answer: string };
      const row = { ...answer("a_3", body.question, 0, 40), answer: body.answer };
      answers.push(row);
      return { status: 201, body: row };
    },
    "DELETE /api/courses/crs_1/shared-answers/a_1": () => {
      answers.splice(0, 1);
      return { status: 204 };
    },
  });
  return service;
}

describe("Knowledge", () => {
  it("lists the material and the shared answers, with the tokens saved", async () => {
    knowledgeService();
    renderAt("/teach/crs_1/knowledge");
    const material = await screen.findByRole("table", { name: "Course material" });
    expect(within(material).getAllByRole("rowheader").map((r) => r.textContent)).toEqual([
      "syllabus.md",
      "lab 1.pdf",
    ]);
    expect(screen.getByRole("button", { name: "Remove, lab 1.pdf" })).toBeEnabled();
    expect(screen.getByText(/agents can search these files/)).toBeInTheDocument();
    expect(screen.getByText(/student's agent is offered its answer/)).toBeInTheDocument();

    const answers = await screen.findByRole("table", { name: /Shared answers/ });
    expect(within(answers).getAllByRole("columnheader").map((h) => h.textContent)).toEqual([
      "Question",
      "Answer",
      "Offered",
      "Tokens saved",
      "Shared",
      "Actions",
    ]);
    const exam = within(answers).getByRole("row", { name: /When is the exam\?/ });
    expect(within(exam).getAllByRole("cell").map((c) => c.textContent).slice(0, 3)).toEqual([
      "The answer to: When is the exam?",
      "3",
      "360",
    ]);
    const total = within(answers).getByRole("row", { name: /Total/ });
    const totals = within(total).getAllByRole("cell").map((c) => c.textContent);
    expect(totals.slice(0, 2)).toEqual(["5", "960"]);
    expect(screen.getByRole("link", { name: "Knowledge" })).toHaveAttribute("aria-current", "page");
    expect(await seriousViolations(document.body)).toEqual([]);
  });

  it("uploads a file's bytes under its name, and shows the server's refusal", async () => {
    const service = knowledgeService();
    const user = userEvent.setup();
    renderAt("/teach/crs_1/knowledge");
    await screen.findByRole("table", { name: "Course material" });
    const picker = screen.getByLabelText("File to add");
    const upload = screen.getByRole("button", { name: "Upload" });
    expect(upload).toBeDisabled();

    await user.upload(picker, new File(["# Week 1\n\nVariables and loops.\n"], "week 1 notes.md"));
    await user.click(upload);
    expect(await screen.findByText("week 1 notes.md added: 7 chunks indexed.")).toBeInTheDocument();
    const put = service.calls.find((c) => c.method === "PUT")!;
    expect(put.path).toBe("/api/courses/crs_1/knowledge/week%201%20notes.md");
    expect(put.contentType).toBe("application/octet-stream");
    expect(put.body).toBe("# Week 1\n\nVariables and loops.\n");
    expect(await screen.findByRole("rowheader", { name: "week 1 notes.md" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Upload" })).toBeDisabled(); // the file was taken

    await user.upload(screen.getByLabelText("File to add"), new File(["%PDF-1.7"], "big.pdf"));
    await user.click(screen.getByRole("button", { name: "Upload" }));
    expect(await screen.findByRole("alert")).toHaveTextContent(
      "the request body is larger than 1048576 bytes; send less",
    );
    expect(screen.queryByRole("rowheader", { name: "big.pdf" })).toBeNull();
  }, 20_000);

  it("shares an answer and stops sharing one", async () => {
    const service = knowledgeService();
    const user = userEvent.setup();
    renderAt("/teach/crs_1/knowledge");
    await screen.findByRole("table", { name: /Shared answers/ });
    const share = screen.getByRole("button", { name: "Share" });
    expect(share).toBeDisabled();
    await user.type(screen.getByLabelText("Question"), "  Where are the slides? ");
    await user.type(screen.getByLabelText("Answer"), "On the course page, under Material.");
    await user.click(share);

    expect(await screen.findByText("Answer shared.")).toBeInTheDocument();
    expect(service.calls.find((c) => c.method === "POST")!.body).toEqual({
      question: "Where are the slides?",
      answer: "On the course page, under Material.",
    });
    expect(await screen.findByRole("rowheader", { name: "Where are the slides?" })).toBeInTheDocument();
    expect(screen.getByLabelText("Question")).toHaveValue("");

    await user.click(screen.getByRole("button", { name: "Remove, When is the exam?" }));
    const dialog = await screen.findByRole("dialog", { name: "Stop sharing this answer?" });
    await user.click(within(dialog).getByRole("button", { name: "Stop sharing" }));
    expect(await screen.findByText("The answer is no longer shared.")).toBeInTheDocument();
    const gone = service.calls.filter((c) => c.method === "DELETE").map((c) => c.path);
    expect(gone).toEqual(["/api/courses/crs_1/shared-answers/a_1"]);
    await waitFor(() =>
      expect(screen.queryByRole("rowheader", { name: "When is the exam?" })).toBeNull(),
    );
  }, 20_000);

  it("removes a file after asking", async () => {
    const service = knowledgeService();
    const user = userEvent.setup();
    renderAt("/teach/crs_1/knowledge");
    await user.click(await screen.findByRole("button", { name: "Remove, syllabus.md" }));
    const dialog = await screen.findByRole("dialog", {
      name: "Remove syllabus.md from the course material?",
    });
    await user.click(within(dialog).getByRole("button", { name: "Remove file" }));
    expect(
      await screen.findByText("syllabus.md was removed from the course material."),
    ).toBeInTheDocument();
    expect(service.calls.find((c) => c.method === "DELETE")!.path).toBe(
      "/api/courses/crs_1/knowledge/syllabus.md",
    );
    expect(screen.queryByRole("rowheader", { name: "syllabus.md" })).toBeNull();
    expect(screen.getByRole("rowheader", { name: "lab 1.pdf" })).toBeInTheDocument();
  }, 20_000);
});
