import "./test-fetch"; // first: before the API client is made
import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { type Call, course, courseRoutes, fakeService, member, renderAt, seriousViolations } from "./testing";

describe("Settings", () => {
  it("sends only what changed and shows the server's refusal", async () => {
    const service = fakeService({
      ...courseRoutes([member("usr_a", "ann@school.edu")]),
      "PATCH /api/courses/crs_1": (call: Call) => {
        const body = call.body as Record<string, unknown>;
        if (body.model === "nonsense") {
          return {
            status: 400,
            body: { error: { type: "bad_request", message: "unknown provider 'nonsense'" } },
          };
        }
        return { body: { ...course, ...body, model_api_key: undefined, model_api_key_set: true } };
      },
    });
    const user = userEvent.setup();
    renderAt("/teach/crs_1/settings");

    const model = await screen.findByLabelText("Model string");
    await user.type(model, "nonsense");
    await user.click(screen.getByRole("button", { name: "Save settings" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("unknown provider 'nonsense'");

    await user.clear(model);
    await user.type(model, "deepseek:deepseek-chat");
    await user.click(screen.getByRole("radio", { name: "Lanes" }));
    await user.click(screen.getByRole("radio", { name: "Set a key" }));
    await user.type(screen.getByLabelText("New provider key"), "sk-secret");
    expect(screen.getByRole("radio", { name: "Server default (Serial)" })).toBeInTheDocument();
    expect(screen.getByLabelText("Endpoint (model_base_url)")).toHaveAttribute("readonly");
    expect(await seriousViolations(document.body)).toEqual([]);
    await user.click(screen.getByRole("button", { name: "Save settings" }));

    expect(await screen.findByText("Settings saved.")).toBeInTheDocument();
    expect(service.calls.filter((c) => c.method === "PATCH").at(-1)!.body).toEqual({
      model: "deepseek:deepseek-chat",
      runtime: "lanes",
      model_api_key: "sk-secret",
    });
    expect(screen.getByText("A key is set")).toBeInTheDocument();
    expect(screen.queryByLabelText("New provider key")).toBeNull();
    expect(screen.getByRole("radio", { name: "Keep the key" })).toBeChecked();
  }, 20_000);
});
