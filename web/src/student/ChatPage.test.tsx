import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import type { SessionEvent } from "../api/events";
import { ChatPage } from "./ChatPage";
import { Log } from "./testing";
import { axeViolations, fakeApi, Refuse, renderPage, teacher } from "./test-utils";

const stream = vi.hoisted(() => ({
  onEvent: null as null | ((event: SessionEvent) => void),
  subscribed: [] as { sessionId: string; after: number | undefined }[],
}));

vi.mock("../api/events", () => ({
  subscribe: (
    sessionId: string,
    onEvent: (event: SessionEvent) => void,
    _onError: unknown,
    options: { after?: number; onOpen?: () => void } = {},
  ) => {
    stream.onEvent = onEvent;
    stream.subscribed.push({ sessionId, after: options.after });
    options.onOpen?.();
    return { close: () => undefined };
  },
}));

const session = {
  id: "s1",
  user_id: "u_alice",
  course_id: "c1",
  title: "Sorting",
  created_at: 1_700_000_000,
  updated_at: 1_700_000_000,
  last_seq: 0,
  runtime: "",
  active: false,
};

function chatApi(me?: object) {
  return fakeApi(me)
    .on("GET", "/api/sessions/{session_id}", session)
    .on("GET", "/api/sessions/{session_id}/files", [
      { path: "/sort.py", size: 120, modified: 1_700_000_100 },
    ])
    .on("GET", "/api/sessions/{session_id}/files/{path}", {
      path: "/sort.py",
      size: 120,
      modified: 1_700_000_100,
      content: "def merge_sort(items): ...",
    });
}

async function emit(events: SessionEvent[]) {
  await act(async () => {
    for (const event of events) stream.onEvent?.(event);
    await new Promise((resolve) => setTimeout(resolve, 60)); // the batch is folded
  });
}

function renderChat() {
  return renderPage(<ChatPage />, "/sessions/s1", "/sessions/:sessionId");
}

beforeEach(() => {
  window.scrollTo = vi.fn() as never;
  stream.onEvent = null;
  stream.subscribed = [];
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("ChatPage", () => {
  it("streams a run: the message, the text as it arrives, tool cards, the plan", async () => {
    chatApi();
    const { container } = renderChat();
    expect(await screen.findByRole("heading", { level: 1, name: "Sorting" })).toBeInTheDocument();
    expect(stream.subscribed[0]).toEqual({ sessionId: "s1", after: 0 });

    const log = new Log();
    log.message("sort this list");
    log.started(1);
    log.run("text_delta", { text: "Let me " });
    await emit(log.events);
    expect(screen.getByText("sort this list")).toBeInTheDocument();
    expect(screen.getByText("Let me")).toBeInTheDocument();
    expect(screen.getAllByText("Working").length).toBeGreaterThan(0);
    expect(screen.getByRole("button", { name: "Stop" })).toBeInTheDocument();
    expect(screen.getByLabelText("Message")).toHaveAttribute(
      "placeholder",
      "Add an instruction, e.g. “wait, use merge sort instead”",
    );

    const next = (kind: string, data: Record<string, unknown>, seq: number): SessionEvent => ({
      seq,
      ts: 1_700_000_100,
      kind: "run",
      state: null,
      data: { kind, ...data },
    });
    await emit([
      next("text_delta", { text: "look at **the files**." }, 4),
      next("tool_call_started", { id: "c1", name: "write_file", arguments: '{"path": "/sort.py"}' }, 5),
      next("todos", { items: [{ content: "write sort.py", status: "in_progress" }] }, 6),
    ]);
    expect(screen.getByText("the files").tagName).toBe("STRONG");
    const card = screen.getByText("write_file").closest("details")!;
    expect(within(card).getByText("Running")).toBeInTheDocument();
    expect(screen.getByRole("heading", { name: "Plan" })).toBeInTheDocument();
    expect(screen.getByText("write sort.py")).toBeInTheDocument();

    await emit([
      next(
        "tool_call_completed",
        { id: "c1", name: "write_file", status: "success", result: "wrote /sort.py", duration: 0.2 },
        7,
      ),
      next("run_completed", { usage: { input_tokens: 1200, output_tokens: 30 }, duration: 2 }, 8),
      { seq: 9, ts: 1_700_000_101, kind: "status", state: null, data: { event: "run_ended", message_seq: 1, state: "done" } },
    ]);
    expect(within(card).getByText("wrote /sort.py")).toBeInTheDocument();
    expect(within(card).getByText("200 ms")).toBeInTheDocument();
    expect(screen.queryByRole("button", { name: "Stop" })).toBeNull();
    expect(screen.getByText("1.2K in · 30 out")).toBeInTheDocument();
    expect(await axeViolations(container)).toEqual([]);
  });

  it("sends with Enter (Shift+Enter is a new line), and shows the message until the stream has it", async () => {
    const api = chatApi().on("POST", "/api/sessions/{session_id}/messages", (call: { body: { text: string } }) => ({
      session_id: "s1",
      seq: 1,
      ts: 1_700_000_000,
      state: "pending",
      text: call.body.text,
      continued: 0,
    }));
    renderChat();
    const box = await screen.findByLabelText("Message");
    await userEvent.type(box, "first line{Shift>}{Enter}{/Shift}second");
    expect(box).toHaveValue("first line\nsecond");
    await userEvent.type(box, "{Enter}");
    await waitFor(() => expect(api.called("POST", "/api/sessions/{session_id}/messages")).toHaveLength(1));
    expect(api.called("POST", "/api/sessions/{session_id}/messages")[0]?.body).toEqual({
      text: "first line\nsecond",
    });
    await waitFor(() => expect(box).toHaveValue(""));
    expect(screen.getByText(/first line/)).toBeInTheDocument();
    expect(screen.getByText("Queued")).toBeInTheDocument();
  });

  it("shows a refusal with when the budget resets, and keeps the text", async () => {
    chatApi().on("POST", "/api/sessions/{session_id}/messages", () => {
      throw new Refuse(429, {
        type: "budget_exceeded",
        message: "your daily budget is spent",
        resets_at: "2030-01-02T00:00:00+00:00",
      });
    });
    renderChat();
    const box = await screen.findByLabelText("Message");
    await userEvent.type(box, "more please{Enter}");
    const alert = await screen.findByRole("alert");
    expect(alert).toHaveTextContent("Budget used up");
    expect(alert).toHaveTextContent("your daily budget is spent");
    expect(alert).toHaveTextContent(/The budget resets .*2030/);
    expect(box).toHaveValue("more please");
  });

  it("stops a run, and continues an interrupted message", async () => {
    const api = chatApi()
      .on("POST", "/api/sessions/{session_id}/cancel", { session_id: "s1", cancelled: true })
      .on("POST", "/api/sessions/{session_id}/continue", { session_id: "s1", seq: 1, ts: 1, state: "pending", text: "x", continued: 1 });
    renderChat();
    await screen.findByRole("heading", { level: 1 });
    const log = new Log();
    log.message("long job");
    log.started(1);
    await emit(log.events);
    await userEvent.click(screen.getByRole("button", { name: "Stop" }));
    expect(api.called("POST", "/api/sessions/{session_id}/cancel")).toHaveLength(1);

    log.status("run_interrupted", 1, { state: "interrupted", reason: "cancelled by the student" });
    await emit(log.events.slice(2));
    expect(screen.getByText("Interrupted")).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Continue" }));
    expect(api.called("POST", "/api/sessions/{session_id}/continue")[0]?.body).toEqual({ seq: 1 });
  });

  it("shows the lanes and stops one running operation", async () => {
    const api = chatApi().on("POST", "/api/sessions/{session_id}/operations/{op_id}/cancel", {
      session_id: "s1",
      op_id: "op1",
      cancelled: true,
    });
    const { container } = renderChat();
    await screen.findByRole("heading", { level: 1 });
    const log = new Log();
    log.message("run the tests");
    log.started(1);
    log.lane("operation_started", {
      lane: "L1",
      op: "op1",
      command: "pytest -q",
      lanes: [
        {
          id: "L1",
          intent: "run the tests",
          status: "waiting",
          active: true,
          created: 1,
          termination: "",
          operations: [{ id: "op1", what: "pytest -q", executor: "x1", status: "running", progress: "" }],
        },
      ],
    });
    await emit(log.events);
    const panel = screen.getByRole("region", { name: "Lanes" });
    expect(within(panel).getByText("run the tests")).toBeInTheDocument();
    expect(within(panel).getByText("Waiting")).toBeInTheDocument();
    await userEvent.click(within(panel).getByRole("button", { name: "Stop operation op1" }));
    expect(api.called("POST", "/api/sessions/{session_id}/operations/{op_id}/cancel")[0]?.params.path).toEqual({
      session_id: "s1",
      op_id: "op1",
    });
    // the operation is in the transcript too, with its own Stop
    expect(screen.getAllByRole("button", { name: "Stop operation op1" })).toHaveLength(2);
    expect(await axeViolations(container)).toEqual([]);
  });

  it("lists the workspace's files and opens one", async () => {
    chatApi();
    renderChat();
    const files = await screen.findByRole("region", { name: "Files" });
    await userEvent.click(await within(files).findByRole("button", { name: /sort\.py/ }));
    expect(await screen.findByText("def merge_sort(items): ...")).toBeInTheDocument();
    fireEvent.click(screen.getByRole("button", { name: "Close" }));
    await waitFor(() => expect(screen.queryByText("def merge_sort(items): ...")).toBeNull());
  });

  it("is read-only for a teacher, who may guide the agent as the teacher", async () => {
    const api = chatApi(teacher).on(
      "POST",
      "/api/sessions/{session_id}/teacher-messages",
      { session_id: "s1", seq: 2, ts: 1, state: "pending", text: "use merge sort", continued: 0 },
    );
    renderChat();
    expect(await screen.findByText(/You are reading a student's session/)).toBeInTheDocument();
    const log = new Log();
    log.message("sort");
    log.status("run_interrupted", 1, { state: "interrupted", reason: "x" });
    await emit(log.events);
    expect(screen.queryByRole("button", { name: "Continue" })).toBeNull();
    expect(screen.queryByLabelText("Message")).toBeNull();
    await userEvent.type(screen.getByLabelText("Message as teacher"), "use merge sort");
    await userEvent.click(screen.getByRole("button", { name: "Send as teacher" }));
    expect(api.called("POST", "/api/sessions/{session_id}/teacher-messages")[0]?.body).toEqual({
      text: "use merge sort",
    });
    expect(api.called("POST", "/api/sessions/{session_id}/messages")).toHaveLength(0);
  });

  it("says so when the session does not exist", async () => {
    fakeApi(); // no GET /api/sessions/{session_id}: a 404
    renderChat();
    expect(await screen.findByRole("heading", { name: "Session not found" })).toBeInTheDocument();
    expect(screen.getByRole("link", { name: "All sessions" })).toBeInTheDocument();
  });
});
