import { render, screen } from "@testing-library/react";
import { Markdown, parseBlocks } from "./Markdown";

describe("parseBlocks", () => {
  it("reads code, headings, lists, quotes, tables and paragraphs", () => {
    const blocks = parseBlocks(
      [
        "# Title",
        "",
        "Some text",
        "on two lines.",
        "- one",
        "- two",
        "",
        "3. three",
        "4. four",
        "",
        "> quoted",
        "",
        "| a | b |",
        "|---|---|",
        "| 1 | 2 |",
        "",
        "```python",
        "print('hi')",
        "```",
        "---",
      ].join("\n"),
    );
    expect(blocks).toEqual([
      { type: "heading", level: 1, text: "Title" },
      { type: "paragraph", text: "Some text\non two lines." },
      { type: "list", ordered: false, start: 1, items: ["one", "two"] },
      { type: "list", ordered: true, start: 3, items: ["three", "four"] },
      { type: "quote", text: "quoted" },
      { type: "table", head: ["a", "b"], rows: [["1", "2"]] },
      { type: "code", lang: "python", text: "print('hi')" },
      { type: "rule" },
    ]);
  });

  it("treats an unclosed fence (while streaming) as code to the end", () => {
    expect(parseBlocks("look:\n```js\nlet a = 1;\nlet b")).toEqual([
      { type: "paragraph", text: "look:" },
      { type: "code", lang: "js", text: "let a = 1;\nlet b" },
    ]);
  });
});

describe("Markdown", () => {
  it("renders inline code, emphasis and safe links only", () => {
    render(
      <Markdown text={"Use `sorted()` with **care** and *style*: [docs](https://docs.python.org) [bad](javascript:alert(1)) <b>x</b>"} />,
    );
    expect(screen.getByText("sorted()").tagName).toBe("CODE");
    expect(screen.getByText("care").tagName).toBe("STRONG");
    expect(screen.getByText("style").tagName).toBe("EM");
    expect(screen.getByRole("link", { name: "docs" })).toHaveAttribute(
      "href",
      "https://docs.python.org",
    );
    expect(screen.queryByRole("link", { name: "bad" })).toBeNull();
    expect(document.querySelector("b")).toBeNull(); // markup stays text
  });

  it("renders a code block with a copy button", () => {
    render(<Markdown text={"```sh\nmake test\n```"} />);
    expect(screen.getByText("make test").tagName).toBe("CODE");
    expect(screen.getByRole("button", { name: "Copy" })).toBeInTheDocument();
  });
});
